//! A posting list as an index build makes it: the ids of the documents holding one
//! trigram (or word), in ascending order, each as its delta from the one before in 7-bit
//! groups (what `store.rs` reads back and `build.rs` and `words.rs` write).

/// Accumulates one posting list while documents arrive in ascending id order.
#[derive(Default)]
pub(crate) struct PostingBuf {
    last: u32,
    pub(crate) count: u32,
    pub(crate) bytes: Vec<u8>,
}

impl PostingBuf {
    pub(crate) fn push(&mut self, doc: u32) {
        let mut delta = doc - if self.count == 0 { 0 } else { self.last };
        loop {
            let byte = (delta & 0x7F) as u8;
            delta >>= 7;
            if delta == 0 {
                self.bytes.push(byte);
                break;
            }
            self.bytes.push(byte | 0x80);
        }
        self.last = doc;
        self.count += 1;
    }
}
