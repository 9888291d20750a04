//! The digests both ends compute from the password (RFC 2831 §2.1.2.1,
//! with `qop=auth` and the `md5-sess` algorithm ZooKeeper's server offers).

use md5::{Digest as _, Md5};

use crate::hex;

/// Everything the digests are computed over.
pub(crate) struct DigestInputs<'a> {
    pub user: &'a str,
    pub realm: &'a str,
    pub password: &'a str,
    pub nonce: &'a str,
    pub cnonce: &'a str,
    pub nc: &'a str,
    pub qop: &'a str,
    pub digest_uri: &'a str,
    pub authzid: Option<&'a str>,
}

impl DigestInputs<'_> {
    /// The client's `response`: proves it knows the password.
    pub(crate) fn response(&self) -> String {
        self.digest(&format!("AUTHENTICATE:{}", self.digest_uri))
    }

    /// The server's `rspauth`: proves it knows the password too.
    pub(crate) fn rspauth(&self) -> String {
        self.digest(&format!(":{}", self.digest_uri))
    }

    fn digest(&self, a2: &str) -> String {
        hex(&Md5::digest(format!(
            "{}:{}:{}:{}:{}:{}",
            self.ha1(),
            self.nonce,
            self.nc,
            self.cnonce,
            self.qop,
            hex(&Md5::digest(a2))
        )))
    }

    fn ha1(&self) -> String {
        let secret = Md5::digest(format!("{}:{}:{}", self.user, self.realm, self.password));
        let mut a1 = secret.to_vec();
        a1.extend_from_slice(format!(":{}:{}", self.nonce, self.cnonce).as_bytes());
        if let Some(authzid) = self.authzid {
            a1.extend_from_slice(format!(":{authzid}").as_bytes());
        }
        hex(&Md5::digest(&a1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of RFC 2831 §4, with its published values.
    #[test]
    fn rfc_2831_example() {
        let inputs = DigestInputs {
            user: "chris",
            realm: "elwood.innosoft.com",
            password: "secret",
            nonce: "OA6MG9tEQGm2hh",
            cnonce: "OA6MHXh6VqTrRk",
            nc: "00000001",
            qop: "auth",
            digest_uri: "imap/elwood.innosoft.com",
            authzid: None,
        };
        assert_eq!(inputs.response(), "d388dad90d4bbd760a152321f2143af7");
        assert_eq!(inputs.rspauth(), "ea40f60335c427b5527b84dbabcdfffd");
    }
}
