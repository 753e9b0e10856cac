//! How a fuzz input says where its body is cut: decoders read from sockets get their bytes in pieces cut anywhere.

/// An input split into a few option bytes, the piece sizes, and the body the decoder reads.
#[derive(Debug)]
pub struct Cut<'a> {
    /// The first byte of the input (0 for an empty one): each target reads its own options from it.
    pub options: u8,
    sizes: &'a [u8],
    /// The bytes the decoder reads.
    pub body: &'a [u8],
}

impl<'a> Cut<'a> {
    /// Byte 0 is `options`; byte 1 says how many size bytes follow (0-7); each size byte is a piece of 1-256 bytes,
    /// used in turn; the rest is the body. With no size byte the body goes in one piece.
    pub fn of(input: &'a [u8]) -> Self {
        let options = input.first().copied().unwrap_or(0);
        let rest = input.get(1..).unwrap_or_default();
        let count = rest.first().map_or(0, |byte| usize::from(byte % 8));
        let rest = rest.get(1..).unwrap_or_default();
        let (sizes, body) = rest.split_at(count.min(rest.len()));
        Cut { options, sizes, body }
    }

    /// The body in pieces of the sizes given, in turn (one piece when none was given).
    pub fn pieces(&self) -> Vec<&'a [u8]> {
        self.split(self.body)
    }

    /// The body one byte at a time: every place a piece can end, at once (a cut that only one place breaks need
    /// not be found by chance).
    pub fn bytes(&self) -> Vec<&'a [u8]> {
        self.body.chunks(1).collect()
    }

    /// Any bytes in pieces of the sizes given, in turn (one piece when none was given): for what a target writes
    /// from the body.
    pub fn split<'b>(&self, bytes: &'b [u8]) -> Vec<&'b [u8]> {
        if self.sizes.is_empty() {
            return vec![bytes];
        }
        let mut pieces = Vec::new();
        let mut rest = bytes;
        for size in self.sizes.iter().cycle() {
            if rest.is_empty() {
                break;
            }
            let (piece, after) = rest.split_at((usize::from(*size) + 1).min(rest.len()));
            pieces.push(piece);
            rest = after;
        }
        pieces
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_are_the_body_in_order() {
        let cut = Cut::of(&[7, 2, 0, 2, b'a', b'b', b'c', b'd', b'e']);
        assert_eq!((cut.options, cut.body), (7, b"abcde".as_slice()));
        assert_eq!(cut.pieces(), [b"a".as_slice(), b"bcd", b"e"]);
        assert_eq!(Cut::of(&[1, 0, b'x', b'y']).pieces(), [b"xy".as_slice()]);
        assert_eq!(Cut::of(&[]).pieces(), [b"".as_slice()]);
    }
}
