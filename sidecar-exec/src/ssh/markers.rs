//! Finds the side channel's marker lines ([`crate::ssh::script`]) in a stream of output and takes them out, leaving
//! every other byte exactly as it came.

/// A marker the host's shell wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marker {
    /// The command is about to run, in process group `pgid`.
    Started { pgid: i32 },
    /// The command ended with this status (128+N for signal N).
    Exited { code: i32 },
    /// The host directory could not be entered; nothing ran.
    NoCwd,
}

/// The longest marker line after the nonce and its colon (`start:` + a pid, `\r\n`): a candidate longer than this
/// is ordinary output.
const MAX_REST: usize = 32;

/// Scans one stream. Output that merely starts like a marker is held back until it can be told apart (a few bytes,
/// and only when a chunk ends with the beginning of `<nonce>:`, which random output practically never does).
#[derive(Debug)]
pub struct Scanner {
    prefix: Vec<u8>,
    pending: Vec<u8>,
}

impl Scanner {
    pub fn new(nonce: &str) -> Self {
        Scanner { prefix: format!("{nonce}:").into_bytes(), pending: Vec::new() }
    }

    /// Feeds `input`; appends the output bytes to `out` and the markers found to `markers`.
    pub fn feed(&mut self, input: &[u8], out: &mut Vec<u8>, markers: &mut Vec<Marker>) {
        self.pending.extend_from_slice(input);
        let mut start = 0;
        loop {
            let rest = &self.pending[start..];
            let Some(at) = find(rest, &self.prefix) else {
                // Keep the longest tail that could still begin a marker.
                let keep = (1..self.prefix.len().min(rest.len() + 1))
                    .rev()
                    .find(|&n| rest.ends_with(&self.prefix[..n]))
                    .unwrap_or(0);
                out.extend_from_slice(&rest[..rest.len() - keep]);
                start += rest.len() - keep;
                break;
            };
            out.extend_from_slice(&rest[..at]);
            let line_start = start + at;
            let after = line_start + self.prefix.len();
            let tail = &self.pending[after..];
            match tail.iter().take(MAX_REST + 1).position(|&b| b == b'\n') {
                Some(end) => match parse(&tail[..end]) {
                    Some(marker) => {
                        markers.push(marker);
                        start = after + end + 1;
                    }
                    None => {
                        out.extend_from_slice(&self.pending[line_start..after]);
                        start = after;
                    }
                },
                None if tail.len() > MAX_REST => {
                    out.extend_from_slice(&self.pending[line_start..after]);
                    start = after;
                }
                None => {
                    // Could be a marker still arriving.
                    start = line_start;
                    break;
                }
            }
        }
        self.pending.drain(..start);
    }

    /// The stream ended: whatever was held back is output.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        out.append(&mut self.pending);
    }
}

fn parse(line: &[u8]) -> Option<Marker> {
    let line = std::str::from_utf8(line).ok()?;
    let line = line.strip_suffix('\r').unwrap_or(line);
    if line == "cwd" {
        return Some(Marker::NoCwd);
    }
    let (kind, number) = line.split_once(':')?;
    let number: i32 = number.parse().ok()?;
    match kind {
        "start" if number > 1 => Some(Marker::Started { pgid: number }),
        "exit" if (0..=255).contains(&number) => Some(Marker::Exited { code: number }),
        _ => None,
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(haystack, needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NONCE: &str = "0123456789abcdef0123456789abcdef";

    fn scan_in_pieces(input: &[u8], piece: usize) -> (Vec<u8>, Vec<Marker>) {
        let mut scanner = Scanner::new(NONCE);
        let (mut out, mut markers) = (Vec::new(), Vec::new());
        for chunk in input.chunks(piece) {
            scanner.feed(chunk, &mut out, &mut markers);
        }
        scanner.finish(&mut out);
        (out, markers)
    }

    #[test]
    fn markers_are_taken_out_whatever_the_chunking() {
        let input = format!("{NONCE}:start:4242\nerr line\npartial{NONCE}:exit:3\nlater\n");
        for piece in [1, 2, 3, 7, 33, 1000] {
            let (out, markers) = scan_in_pieces(input.as_bytes(), piece);
            assert_eq!(String::from_utf8(out).unwrap(), "err line\npartiallater\n", "piece {piece}");
            assert_eq!(markers, [Marker::Started { pgid: 4242 }, Marker::Exited { code: 3 }], "piece {piece}");
        }
    }

    #[test]
    fn look_alikes_are_output() {
        let input = format!("{NONCE}:exit:999\n{NONCE}:nope\n{NONCE}:start:{}\n0123456789abc", "9".repeat(40));
        for piece in [1, 5, 1000] {
            let (out, markers) = scan_in_pieces(input.as_bytes(), piece);
            assert_eq!(out, input.as_bytes(), "piece {piece}");
            assert!(markers.is_empty());
        }
        let (out, markers) = scan_in_pieces(format!("{NONCE}:cwd\r\n").as_bytes(), 4);
        assert!(out.is_empty());
        assert_eq!(markers, [Marker::NoCwd]);
    }

    #[test]
    fn binary_output_passes_unchanged() {
        let data = testkit::random_bytes(100_000, 7);
        let (out, markers) = scan_in_pieces(&data, 4096);
        assert_eq!(out, data);
        assert!(markers.is_empty());
    }
}
