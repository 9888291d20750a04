//! The text of DIGEST-MD5 tokens: comma-separated `name=value` pairs,
//! values bare or quoted with backslash escapes (RFC 2831 §7.2).

use std::collections::HashMap;

/// The directives of a token by name.
pub(crate) struct Directives(HashMap<String, String>);

impl Directives {
    pub(crate) fn parse(token: &[u8]) -> Result<Self, String> {
        let text = std::str::from_utf8(token).map_err(|_| "a token that is not UTF-8")?;
        Ok(Self(parse(text)))
    }

    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }

    /// A directive the token must carry.
    pub(crate) fn required(&self, name: &str) -> Result<&str, String> {
        self.get(name)
            .ok_or_else(|| format!("a token without {name}"))
    }
}

fn parse(text: &str) -> HashMap<String, String> {
    let mut fields = HashMap::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let Some(eq) = rest.find('=') else { break };
        let name = rest[..eq].trim().trim_start_matches(',').trim().to_string();
        rest = &rest[eq + 1..];
        let value;
        if let Some(quoted) = rest.strip_prefix('"') {
            let (unquoted, after) = unquote(quoted);
            value = unquoted;
            rest = after;
        } else {
            let end = rest.find(',').unwrap_or(rest.len());
            value = rest[..end].trim().to_string();
            rest = &rest[end..];
        }
        rest = rest.trim_start_matches(',').trim_start();
        fields.insert(name, value);
    }
    fields
}

/// The value of a quoted string whose opening quote is already consumed,
/// and what follows its closing quote.
fn unquote(quoted: &str) -> (String, &str) {
    let mut out = String::new();
    let mut chars = quoted.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => {
                if let Some((_, escaped)) = chars.next() {
                    out.push(escaped);
                }
            }
            '"' => return (out, &quoted[i + 1..]),
            c => out.push(c),
        }
    }
    (out, "")
}

/// `value` as a quoted string.
pub(crate) fn quote(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_bare_and_quoted_values() {
        let f = Directives::parse(
            br#"username="alice",realm="zk-sasl-md5",nc=00000001,qop=auth,response=abc"#,
        )
        .unwrap();
        assert_eq!(f.get("username"), Some("alice"));
        assert_eq!(f.get("nc"), Some("00000001"));
        assert_eq!(f.get("response"), Some("abc"));
        assert!(f.required("cnonce").is_err());
    }

    #[test]
    fn quoting_round_trips() {
        let value = r#"a "quoted" \ name, with commas"#;
        let token = format!("username={},nc=1", quote(value));
        let f = Directives::parse(token.as_bytes()).unwrap();
        assert_eq!(f.get("username"), Some(value));
        assert_eq!(f.get("nc"), Some("1"));
    }

    #[test]
    fn refuses_bytes_that_are_not_text() {
        assert!(Directives::parse(&[0xff, 0xfe]).is_err());
    }
}
