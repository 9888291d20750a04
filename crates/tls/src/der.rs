//! Just enough DER to walk a certificate to its subject: tag, length,
//! content. Every length is checked against what is left.

pub(crate) const SEQUENCE: u8 = 0x30;
pub(crate) const SET: u8 = 0x31;
pub(crate) const OID: u8 = 0x06;

/// One element: its tag, its content, and its whole encoding.
pub(crate) struct Element<'a> {
    pub tag: u8,
    pub content: &'a [u8],
    pub encoded: &'a [u8],
}

pub(crate) struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Self { rest: bytes }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    pub(crate) fn peek_tag(&self) -> Option<u8> {
        self.rest.first().copied()
    }

    pub(crate) fn element(&mut self) -> Result<Element<'a>, String> {
        let bytes = self.rest;
        let (&tag, after_tag) = bytes.split_first().ok_or("truncated DER")?;
        if tag & 0x1f == 0x1f {
            return Err("a multi-byte DER tag".into());
        }
        let (&first, mut after_len) = after_tag.split_first().ok_or("truncated DER")?;
        let length = if first < 0x80 {
            usize::from(first)
        } else {
            let count = usize::from(first & 0x7f);
            if count == 0 || count > 4 || after_len.len() < count {
                return Err("a bad DER length".into());
            }
            let (len_bytes, rest) = after_len.split_at(count);
            after_len = rest;
            len_bytes
                .iter()
                .fold(0usize, |n, &b| (n << 8) | usize::from(b))
        };
        if after_len.len() < length {
            return Err("a DER length past the end".into());
        }
        let header = bytes.len() - after_len.len();
        let (content, rest) = after_len.split_at(length);
        self.rest = rest;
        Ok(Element {
            tag,
            content,
            encoded: &bytes[..header + length],
        })
    }

    /// The next element, which must have `tag`.
    pub(crate) fn expect(&mut self, tag: u8) -> Result<Element<'a>, String> {
        let element = self.element()?;
        if element.tag != tag {
            return Err(format!(
                "expected DER tag {tag:#04x}, found {:#04x}",
                element.tag
            ));
        }
        Ok(element)
    }
}

/// An OBJECT IDENTIFIER's content in dotted form.
pub(crate) fn oid(content: &[u8]) -> Result<String, String> {
    let mut arcs: Vec<u64> = Vec::new();
    let mut value: u64 = 0;
    for (i, &byte) in content.iter().enumerate() {
        if value > u64::MAX >> 7 {
            return Err("an OID arc too large".into());
        }
        value = (value << 7) | u64::from(byte & 0x7f);
        if byte & 0x80 == 0 {
            if arcs.is_empty() {
                let first = (value / 40).min(2);
                arcs.push(first);
                arcs.push(value - first * 40);
            } else {
                arcs.push(value);
            }
            value = 0;
        } else if i + 1 == content.len() {
            return Err("a truncated OID".into());
        }
    }
    if arcs.is_empty() {
        return Err("an empty OID".into());
    }
    Ok(arcs
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join("."))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_short_and_long_lengths() {
        let mut long = vec![0x04, 0x81, 0x80];
        long.extend([7u8; 0x80]);
        let mut r = Reader::new(&long);
        let e = r.element().unwrap();
        assert_eq!((e.tag, e.content.len(), e.encoded.len()), (4, 128, 131));
        assert!(r.is_empty());
        for bad in [
            &[0x04, 0x05, 1][..],
            &[0x04, 0x85, 1, 1, 1, 1, 1],
            &[0x04],
            &[0x1f, 1, 0],
        ] {
            assert!(Reader::new(bad).element().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn dotted_oids() {
        assert_eq!(oid(&[0x55, 0x04, 0x03]).unwrap(), "2.5.4.3");
        assert_eq!(
            oid(&[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x01]).unwrap(),
            "1.2.840.113549.1.9.1"
        );
        assert!(oid(&[0x86]).is_err());
    }
}
