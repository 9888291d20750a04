//! A certificate's subject as Java's `X500Principal.getName()` prints it
//! (RFC 2253), which is what ZooKeeper's `x509` scheme names a client by:
//! the last RDN first, RDNs joined by `,`, the values of one RDN by `+`,
//! the RFC 2253 keywords (CN, C, L, ST, O, OU, STREET, DC, UID) by name
//! and every other attribute as its dotted OID with `#` and the value's
//! DER in hex.

use crate::der::{self, Reader, OID, SEQUENCE, SET};

const KEYWORDS: &[(&str, &str)] = &[
    ("2.5.4.3", "CN"),
    ("2.5.4.6", "C"),
    ("2.5.4.7", "L"),
    ("2.5.4.8", "ST"),
    ("2.5.4.10", "O"),
    ("2.5.4.11", "OU"),
    ("2.5.4.9", "STREET"),
    ("0.9.2342.19200300.100.1.25", "DC"),
    ("0.9.2342.19200300.100.1.1", "UID"),
];

/// The subject of a DER certificate.
pub fn subject_name(certificate: &[u8]) -> Result<String, String> {
    let mut cert = Reader::new(certificate);
    let mut cert = Reader::new(cert.expect(SEQUENCE)?.content);
    let mut tbs = Reader::new(cert.expect(SEQUENCE)?.content);
    if tbs.peek_tag() == Some(0xa0) {
        tbs.element()?; // version
    }
    tbs.element()?; // serial number
    tbs.expect(SEQUENCE)?; // signature algorithm
    tbs.expect(SEQUENCE)?; // issuer
    tbs.expect(SEQUENCE)?; // validity
    name(tbs.expect(SEQUENCE)?.content)
}

fn name(rdns: &[u8]) -> Result<String, String> {
    let mut reader = Reader::new(rdns);
    let mut printed = Vec::new();
    while !reader.is_empty() {
        let mut set = Reader::new(reader.expect(SET)?.content);
        let mut values = Vec::new();
        while !set.is_empty() {
            let mut ava = Reader::new(set.expect(SEQUENCE)?.content);
            let oid = der::oid(ava.expect(OID)?.content)?;
            values.push(attribute(&oid, ava.element()?));
        }
        printed.push(values.join("+"));
    }
    printed.reverse();
    Ok(printed.join(","))
}

fn attribute(oid: &str, value: der::Element<'_>) -> String {
    let keyword = KEYWORDS.iter().find(|(o, _)| *o == oid).map(|(_, k)| *k);
    match (keyword, string_value(&value)) {
        (Some(keyword), Some(text)) => format!("{keyword}={}", escape(&text)),
        (keyword, _) => format!("{}=#{}", keyword.unwrap_or(oid), hex(value.encoded)),
    }
}

/// The text of a DER string type; `None` for anything else.
fn string_value(value: &der::Element<'_>) -> Option<String> {
    const UTF8: u8 = 0x0c;
    const PRINTABLE: u8 = 0x13;
    const TELETEX: u8 = 0x14;
    const IA5: u8 = 0x16;
    const UNIVERSAL: u8 = 0x1c;
    const BMP: u8 = 0x1e;
    match value.tag {
        UTF8 | PRINTABLE | IA5 => String::from_utf8(value.content.to_vec()).ok(),
        TELETEX => Some(value.content.iter().map(|&b| char::from(b)).collect()),
        BMP => {
            let units: Vec<u16> = value
                .content
                .chunks_exact(2)
                .map(|pair| u16::from_be_bytes([pair[0], pair[1]]))
                .collect();
            String::from_utf16(&units).ok()
        }
        UNIVERSAL => value
            .content
            .chunks_exact(4)
            .map(|quad| char::from_u32(u32::from_be_bytes([quad[0], quad[1], quad[2], quad[3]])))
            .collect(),
        _ => None,
    }
}

/// RFC 2253 escaping as Java applies it.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let last = text.chars().count().saturating_sub(1);
    for (i, c) in text.chars().enumerate() {
        let special = ",=+<>#;\"\\".contains(c);
        let edge_space = c == ' ' && (i == 0 || i == last);
        if special || edge_space {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ava(oid: &[u8], tag: u8, value: &[u8]) -> Vec<u8> {
        let mut inner = vec![OID, oid.len() as u8];
        inner.extend_from_slice(oid);
        inner.push(tag);
        inner.push(value.len() as u8);
        inner.extend_from_slice(value);
        let mut seq = vec![SEQUENCE, inner.len() as u8];
        seq.extend(inner);
        seq
    }

    fn rdn(avas: &[Vec<u8>]) -> Vec<u8> {
        let inner: Vec<u8> = avas.concat();
        let mut set = vec![SET, inner.len() as u8];
        set.extend(inner);
        set
    }

    const CN: &[u8] = &[0x55, 4, 3];
    const O: &[u8] = &[0x55, 4, 10];
    const C: &[u8] = &[0x55, 4, 6];
    const EMAIL: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x01];

    #[test]
    fn prints_as_javas_x500_principal() {
        let rdns = [
            rdn(&[ava(C, 0x13, b"US")]),
            rdn(&[ava(O, 0x0c, b"Paddock, Inc")]),
            rdn(&[ava(CN, 0x0c, b"alice"), ava(EMAIL, 0x16, b"a@x")]),
        ]
        .concat();
        assert_eq!(
            name(&rdns).unwrap(),
            "CN=alice+1.2.840.113549.1.9.1=#1603614078,O=Paddock\\, Inc,C=US"
        );
    }

    #[test]
    fn escapes_as_java() {
        assert_eq!(escape(" a=b#c "), "\\ a\\=b\\#c\\ ");
        assert_eq!(escape("plain.name-1"), "plain.name-1");
    }

    #[test]
    fn refuses_what_is_not_a_certificate() {
        assert!(subject_name(b"").is_err());
        assert!(subject_name(&[SEQUENCE, 2, SEQUENCE, 0]).is_err());
    }
}
