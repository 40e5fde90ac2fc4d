//! Little-endian reading and writing over byte slices, every read bounded.

use crate::error::DecodeError;

/// Reads a body; offsets reported are from the start of the frame.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    base: usize,
}

impl<'a> Reader<'a> {
    /// A reader of `body`, which starts at frame offset `base`.
    pub(crate) fn new(body: &'a [u8], base: usize) -> Self {
        Reader {
            buf: body,
            pos: 0,
            base,
        }
    }

    /// The frame offset of the next byte.
    pub(crate) fn offset(&self) -> usize {
        self.base + self.pos
    }

    /// Bytes left in the body.
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn take(&mut self, field: &'static str, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.remaining() < n {
            return Err(DecodeError::Truncated {
                field,
                offset: self.offset(),
                needed: n,
                available: self.remaining(),
            });
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], DecodeError> {
        let s = self.take(field, N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    /// A byte.
    pub(crate) fn u8(&mut self, field: &'static str) -> Result<u8, DecodeError> {
        Ok(self.array::<1>(field)?[0])
    }

    /// A u16.
    pub(crate) fn u16(&mut self, field: &'static str) -> Result<u16, DecodeError> {
        Ok(u16::from_le_bytes(self.array(field)?))
    }

    /// A u32.
    pub(crate) fn u32(&mut self, field: &'static str) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.array(field)?))
    }

    /// A u64.
    pub(crate) fn u64(&mut self, field: &'static str) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.array(field)?))
    }

    /// A u64 in `min..=max`.
    pub(crate) fn u64_in(
        &mut self,
        field: &'static str,
        min: u64,
        max: u64,
    ) -> Result<u64, DecodeError> {
        let offset = self.offset();
        let value = self.u64(field)?;
        in_range(field, offset, value, min, max)
    }

    /// A u32 in `min..=max`.
    pub(crate) fn u32_in(
        &mut self,
        field: &'static str,
        min: u32,
        max: u32,
    ) -> Result<u32, DecodeError> {
        let offset = self.offset();
        let value = self.u32(field)?;
        in_range(field, offset, value.into(), min.into(), max.into()).map(|v| v as u32)
    }

    /// A u16 in `min..=max`.
    pub(crate) fn u16_in(
        &mut self,
        field: &'static str,
        min: u16,
        max: u16,
    ) -> Result<u16, DecodeError> {
        let offset = self.offset();
        let value = self.u16(field)?;
        in_range(field, offset, value.into(), min.into(), max.into()).map(|v| v as u16)
    }

    /// A boolean: 0 or 1.
    pub(crate) fn bool(&mut self, field: &'static str) -> Result<bool, DecodeError> {
        let offset = self.offset();
        match self.u8(field)? {
            0 => Ok(false),
            1 => Ok(true),
            v => Err(DecodeError::InvalidTag {
                field,
                offset,
                value: v.into(),
            }),
        }
    }

    /// An optional u32: a tag byte (0 none, 1 some) then, if some, the value.
    pub(crate) fn opt_u32(&mut self, field: &'static str) -> Result<Option<u32>, DecodeError> {
        Ok(if self.bool(field)? {
            Some(self.u32(field)?)
        } else {
            None
        })
    }

    /// A list's length (u16), at most `max` and at most what the rest of
    /// the body can hold at `min_elem` bytes an element: checked before the
    /// caller allocates.
    pub(crate) fn len(
        &mut self,
        field: &'static str,
        max: usize,
        min_elem: usize,
    ) -> Result<usize, DecodeError> {
        let offset = self.offset();
        let len = usize::from(self.u16(field)?);
        let fits = self.remaining() / min_elem.max(1);
        let bound = max.min(fits);
        if len > bound {
            return Err(DecodeError::TooLong {
                field,
                offset,
                len,
                max: bound,
            });
        }
        Ok(len)
    }

    /// A UTF-8 string of at most `max` bytes, its length a u16 before it.
    pub(crate) fn str(&mut self, field: &'static str, max: usize) -> Result<String, DecodeError> {
        let len = self.len(field, max, 1)?;
        let offset = self.offset();
        let bytes = self.take(field, len)?;
        std::str::from_utf8(bytes)
            .map(str::to_owned)
            .map_err(|_| DecodeError::InvalidUtf8 { field, offset })
    }

    /// Refuses bytes left over after the message.
    pub(crate) fn finish(self) -> Result<(), DecodeError> {
        if self.remaining() > 0 {
            return Err(DecodeError::TrailingBytes {
                offset: self.offset(),
                count: self.remaining(),
            });
        }
        Ok(())
    }
}

fn in_range(
    field: &'static str,
    offset: usize,
    value: u64,
    min: u64,
    max: u64,
) -> Result<u64, DecodeError> {
    if value < min || value > max {
        return Err(DecodeError::OutOfRange {
            field,
            offset,
            value,
            min,
            max,
        });
    }
    Ok(value)
}

/// Writes a body. It checks nothing: [`encode`](crate::encode) decodes
/// what it wrote, so that the bounds live in one place, the reader.
#[derive(Default)]
pub(crate) struct Writer {
    pub(crate) buf: Vec<u8>,
}

impl Writer {
    pub(crate) fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }

    pub(crate) fn u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    pub(crate) fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    pub(crate) fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    pub(crate) fn bool(&mut self, v: bool) {
        self.u8(v.into());
    }

    pub(crate) fn opt_u32(&mut self, v: Option<u32>) {
        match v {
            None => self.u8(0),
            Some(x) => {
                self.u8(1);
                self.u32(x);
            }
        }
    }

    /// A list's length; a length beyond u16 is written saturated, which the
    /// reader then refuses as too long.
    pub(crate) fn len(&mut self, n: usize) {
        self.u16(u16::try_from(n).unwrap_or(u16::MAX));
    }

    /// A string: its length, then its bytes (all of them if the length
    /// fits a u16; the reader refuses it otherwise).
    pub(crate) fn str(&mut self, s: &str) {
        self.len(s.len());
        let n = s.len().min(usize::from(u16::MAX));
        self.buf.extend_from_slice(&s.as_bytes()[..n]);
    }
}
