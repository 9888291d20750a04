//! JAAS login files as Java reads them (`Name { module flag key="value"
//! ...; };`, with `//` and `/* */` comments): the users of the `Server`
//! section ZooKeeper's server authenticates (`user_NAME="password"`), and
//! the `username` and `password` of the section a client logs in with
//! (`Client` unless `zookeeper.sasl.clientconfig` names another).

use crate::Users;

/// The section ZooKeeper's client reads by default.
pub const CLIENT_SECTION: &str = "Client";
/// The section ZooKeeper's server reads.
pub const SERVER_SECTION: &str = "Server";

/// One named section: the options of all its login modules, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    pub name: String,
    pub options: Vec<(String, String)>,
}

impl Section {
    fn option(&self, key: &str) -> Option<&str> {
        self.options
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// A client's user and password.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Login {
    pub username: String,
    pub password: String,
}

/// The users of the `Server` section; `None` when the file has none, so
/// the server offers no SASL.
pub fn server_users(text: &str) -> Result<Option<Users>, String> {
    let Some(section) = find(text, SERVER_SECTION)? else {
        return Ok(None);
    };
    let users = section
        .options
        .iter()
        .filter_map(|(key, value)| Some((key.strip_prefix("user_")?.to_owned(), value.clone())))
        .collect();
    Ok(Some(users))
}

/// The login of section `name`.
pub fn client_login(text: &str, name: &str) -> Result<Login, String> {
    let section = find(text, name)?.ok_or_else(|| format!("no section named {name}"))?;
    let field = |key: &str| {
        section
            .option(key)
            .map(str::to_owned)
            .ok_or_else(|| format!("section {name} has no {key}"))
    };
    Ok(Login {
        username: field("username")?,
        password: field("password")?,
    })
}

/// Section `name`, if the file has it.
pub fn find(text: &str, name: &str) -> Result<Option<Section>, String> {
    Ok(parse(text)?.into_iter().find(|s| s.name == name))
}

/// Every section of a JAAS file.
pub fn parse(text: &str) -> Result<Vec<Section>, String> {
    let mut tokens = tokenize(text)?.into_iter().peekable();
    let mut sections = Vec::new();
    while let Some(token) = tokens.next() {
        let Token::Word(name) = token else {
            return Err(format!("expected a section name, found {token}"));
        };
        expect(tokens.next(), Token::Open, &name)?;
        let mut options = Vec::new();
        loop {
            match tokens.next() {
                Some(Token::Close) => break,
                Some(Token::Word(_module)) => {
                    let _flag = word(tokens.next(), &name)?;
                    while let Some(Token::Word(_)) = tokens.peek() {
                        let key = word(tokens.next(), &name)?;
                        expect(tokens.next(), Token::Equals, &name)?;
                        let value = match tokens.next() {
                            Some(Token::Word(v) | Token::Quoted(v)) => v,
                            other => return Err(unexpected(other, &name)),
                        };
                        options.push((key, value));
                    }
                    expect(tokens.next(), Token::Semicolon, &name)?;
                }
                other => return Err(unexpected(other, &name)),
            }
        }
        expect(tokens.next(), Token::Semicolon, &name)?;
        sections.push(Section { name, options });
    }
    Ok(sections)
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(String),
    Quoted(String),
    Open,
    Close,
    Semicolon,
    Equals,
}

impl std::fmt::Display for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Token::Word(w) => write!(f, "{w:?}"),
            Token::Quoted(q) => write!(f, "the string {q:?}"),
            Token::Open => f.write_str("'{'"),
            Token::Close => f.write_str("'}'"),
            Token::Semicolon => f.write_str("';'"),
            Token::Equals => f.write_str("'='"),
        }
    }
}

fn expect(found: Option<Token>, wanted: Token, section: &str) -> Result<(), String> {
    match found {
        Some(token) if token == wanted => Ok(()),
        other => Err(format!(
            "in section {section}: expected {wanted}, found {}",
            describe(other.as_ref())
        )),
    }
}

fn word(found: Option<Token>, section: &str) -> Result<String, String> {
    match found {
        Some(Token::Word(w)) => Ok(w),
        other => Err(unexpected(other, section)),
    }
}

fn unexpected(found: Option<Token>, section: &str) -> String {
    format!(
        "in section {section}: unexpected {}",
        describe(found.as_ref())
    )
}

fn describe(token: Option<&Token>) -> String {
    token.map_or_else(|| "the end of the file".to_owned(), Token::to_string)
}

fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {}
            '/' if chars.peek() == Some(&'/') => {
                chars.by_ref().take_while(|&c| c != '\n').for_each(drop);
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut previous = ' ';
                loop {
                    match chars.next() {
                        Some('/') if previous == '*' => break,
                        Some(c) => previous = c,
                        None => return Err("a /* comment is not closed".into()),
                    }
                }
            }
            '{' => tokens.push(Token::Open),
            '}' => tokens.push(Token::Close),
            ';' => tokens.push(Token::Semicolon),
            '=' => tokens.push(Token::Equals),
            '"' => tokens.push(Token::Quoted(quoted(&mut chars)?)),
            c => {
                let mut word = String::from(c);
                while let Some(&next) = chars.peek() {
                    if next.is_whitespace() || "{};=\"".contains(next) {
                        break;
                    }
                    word.push(next);
                    chars.next();
                }
                tokens.push(Token::Word(word));
            }
        }
    }
    Ok(tokens)
}

/// A quoted string after its opening quote, with Java's escapes.
fn quoted(chars: &mut impl Iterator<Item = char>) -> Result<String, String> {
    let mut out = String::new();
    loop {
        match chars.next() {
            None => return Err("a quoted string is not closed".into()),
            Some('"') => return Ok(out),
            Some('\\') => match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some('r') => out.push('\r'),
                Some(c) => out.push(c),
                None => return Err("a quoted string is not closed".into()),
            },
            Some(c) => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
        // ZooKeeper's server users
        Server {
            org.apache.zookeeper.server.auth.DigestLoginModule required
            user_super="adminsecret"
            user_alice="a \"quoted\" secret";
        };
        /* what zkCli logs in with */
        Client {
            org.apache.zookeeper.server.auth.DigestLoginModule required
            username="alice"
            password="a \"quoted\" secret";
        };
    "#;

    #[test]
    fn reads_the_server_users() {
        let users = server_users(FILE).unwrap().unwrap();
        assert_eq!(users.len(), 2);
        assert_eq!(users["alice"], "a \"quoted\" secret");
        assert_eq!(users["super"], "adminsecret");
    }

    #[test]
    fn reads_a_client_login() {
        let login = client_login(FILE, CLIENT_SECTION).unwrap();
        assert_eq!(login.username, "alice");
        assert_eq!(login.password, "a \"quoted\" secret");
        assert_eq!(
            client_login(FILE, "Other").unwrap_err(),
            "no section named Other"
        );
    }

    #[test]
    fn no_server_section_is_no_sasl() {
        assert_eq!(
            server_users("Client { m required username=x; };").unwrap(),
            None
        );
    }

    #[test]
    fn malformed_files_are_refused_with_where() {
        for (text, error) in [
            ("Server { m required user_a=\"x\" };", "expected ';'"),
            ("Server { m required user_a=\"x\";", "the end of the file"),
            ("Server { m required user_a=\"x; };", "not closed"),
            ("Server { m required user_a }; };", "expected '='"),
            ("/* open", "not closed"),
        ] {
            let found = parse(text).unwrap_err();
            assert!(found.contains(error), "{text:?}: {found}");
        }
    }
}
