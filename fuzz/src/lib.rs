//! What the fuzz targets share: reading the input as little-endian fields.

/// Reads the input as little-endian fields; runs dry as zeros.
#[derive(Debug)]
pub struct Input<'a>(pub &'a [u8]);

impl Input<'_> {
    pub fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((b, rest)) => {
                self.0 = rest;
                *b
            }
            None => 0,
        }
    }

    pub fn u16(&mut self) -> u16 {
        u16::from(self.u8()) | u16::from(self.u8()) << 8
    }

    pub fn u32(&mut self) -> u32 {
        u32::from(self.u16()) | u32::from(self.u16()) << 16
    }

    /// Up to `max - 1` bytes (a length field, then as many bytes as remain).
    pub fn bytes(&mut self, max: usize) -> Vec<u8> {
        let n = usize::from(self.u16()) % max;
        let n = n.min(self.0.len());
        let (b, rest) = self.0.split_at(n);
        self.0 = rest;
        b.to_vec()
    }
}
