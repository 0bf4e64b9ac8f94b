//! Canonical byte encoding for signed envelopes: every field length-prefixed
//! (u32 big-endian), every optional field written even when empty, in a
//! fixed order. Protobuf is not canonical, so we never sign protobuf.

/// Why a canonical byte string could not be read back.
#[derive(Debug, thiserror::Error)]
#[error("malformed canonical encoding: {0}")]
pub struct WireError(pub &'static str);

/// Bounds a single field so a hostile length prefix cannot ask for gigabytes.
const MAX_FIELD: usize = 8 << 20;

#[derive(Default)]
pub struct Writer(Vec<u8>);

impl Writer {
    pub fn new(domain: &str) -> Self {
        let mut w = Writer(Vec::with_capacity(1024));
        w.bytes(domain.as_bytes());
        w
    }

    pub fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.0.extend_from_slice(&(b.len() as u32).to_be_bytes());
        self.0.extend_from_slice(b);
        self
    }

    pub fn str(&mut self, s: &str) -> &mut Self {
        self.bytes(s.as_bytes())
    }

    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.bytes(&v.to_be_bytes())
    }

    pub fn finish(self) -> Vec<u8> {
        self.0
    }
}

pub struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    /// Start reading; the first field must be exactly `domain`.
    pub fn new(bytes: &'a [u8], domain: &str) -> Result<Self, WireError> {
        let mut r = Reader { rest: bytes };
        if r.bytes()? != domain.as_bytes() {
            return Err(WireError("wrong domain"));
        }
        Ok(r)
    }

    pub fn bytes(&mut self) -> Result<&'a [u8], WireError> {
        if self.rest.len() < 4 {
            return Err(WireError("truncated length"));
        }
        let (len, rest) = self.rest.split_at(4);
        let len = u32::from_be_bytes(len.try_into().expect("4 bytes")) as usize;
        if len > MAX_FIELD || rest.len() < len {
            return Err(WireError("truncated field"));
        }
        let (field, rest) = rest.split_at(len);
        self.rest = rest;
        Ok(field)
    }

    pub fn string(&mut self) -> Result<String, WireError> {
        String::from_utf8(self.bytes()?.to_vec()).map_err(|_| WireError("not UTF-8"))
    }

    pub fn u64(&mut self) -> Result<u64, WireError> {
        let b: [u8; 8] = self
            .bytes()?
            .try_into()
            .map_err(|_| WireError("bad integer"))?;
        Ok(u64::from_be_bytes(b))
    }

    pub fn end(self) -> Result<(), WireError> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(WireError("trailing bytes"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_hostile_input() {
        let mut w = Writer::new("d");
        w.str("a").u64(7).bytes(b"");
        let bytes = w.finish();
        let mut r = Reader::new(&bytes, "d").unwrap();
        assert_eq!(r.string().unwrap(), "a");
        assert_eq!(r.u64().unwrap(), 7);
        assert_eq!(r.bytes().unwrap(), b"");
        r.end().unwrap();
        assert!(Reader::new(&bytes, "e").is_err());
        for cut in 0..bytes.len() {
            let Ok(mut r) = Reader::new(&bytes[..cut], "d") else {
                continue;
            };
            let ok = r
                .string()
                .and_then(|_| r.u64())
                .and_then(|_| r.bytes().map(|_| ()));
            assert!(ok.is_err() || r.end().is_err() || cut == bytes.len());
        }
        let mut huge = 1u32.to_be_bytes().to_vec();
        huge.extend_from_slice(b"d");
        huge.extend_from_slice(&u32::MAX.to_be_bytes());
        assert!(Reader::new(&huge, "d").unwrap().bytes().is_err());
    }
}
