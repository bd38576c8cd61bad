//! Reading records: JSONL lines with a bounded buffer, JSON documents with a size cap.

use std::io::{self, BufRead, Read};

/// What [`read_line`] found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Line {
    /// The end of the input, nothing read.
    Eof,
    /// A line (in the buffer, without its `\n` or `\r\n`); `newline` is false for a last
    /// line that the input ends without a newline.
    Complete { newline: bool },
    /// A line longer than the cap: it was read past, not kept (the buffer is empty).
    TooLong,
}

/// Reads the next line into `buf` (cleared first), keeping at most `cap` bytes: a longer
/// line is consumed up to its newline and dropped. `consumed` counts the bytes read.
pub(crate) fn read_line<R: BufRead>(r: &mut R, buf: &mut Vec<u8>, cap: usize, consumed: &mut u64) -> io::Result<Line> {
    buf.clear();
    let mut too_long = false;
    let mut any = false;
    loop {
        let available = match r.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            return Ok(match (any, too_long) {
                (false, _) => Line::Eof,
                (true, true) => Line::TooLong,
                (true, false) => finish(buf, cap, false),
            });
        }
        any = true;
        let (chunk, found) = match memchr::memchr(b'\n', available) {
            Some(i) => (&available[..i], true),
            None => (available, false),
        };
        let used = chunk.len() + usize::from(found);
        if !too_long {
            // One byte of slack for the `\r` of a `\r\n` ending.
            if buf.len() + chunk.len() > cap.saturating_add(1) {
                too_long = true;
                buf.clear();
                buf.shrink_to(64 * 1024);
            } else {
                buf.extend_from_slice(chunk);
            }
        }
        r.consume(used);
        *consumed += used as u64;
        if found {
            if too_long {
                return Ok(Line::TooLong);
            }
            return Ok(finish(buf, cap, true));
        }
    }
}

/// Drops a final `\r` and applies the cap (the buffer may hold one byte of slack).
fn finish(buf: &mut Vec<u8>, cap: usize, newline: bool) -> Line {
    if buf.last() == Some(&b'\r') {
        buf.pop();
    }
    if buf.len() > cap {
        buf.clear();
        return Line::TooLong;
    }
    Line::Complete { newline }
}

/// Reads a whole input into `buf` unless it is longer than `cap` bytes (then `Ok(false)`,
/// and what was read is dropped).
pub(crate) fn read_capped<R: Read>(r: R, buf: &mut Vec<u8>, cap: usize, consumed: &mut u64) -> io::Result<bool> {
    buf.clear();
    let limit = (cap as u64).saturating_add(1);
    let n = r.take(limit).read_to_end(buf)?;
    *consumed += n as u64;
    if n as u64 > cap as u64 {
        buf.clear();
        buf.shrink_to_fit();
        return Ok(false);
    }
    Ok(true)
}

/// The UTF-8 byte order mark, skipped at the start of a file.
pub(crate) const BOM: &[u8] = b"\xEF\xBB\xBF";

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &[u8], cap: usize) -> Vec<(Line, Vec<u8>)> {
        let mut r = io::BufReader::with_capacity(4, input);
        let mut buf = Vec::new();
        let mut consumed = 0;
        let mut out = Vec::new();
        loop {
            let l = read_line(&mut r, &mut buf, cap, &mut consumed).unwrap();
            if l == Line::Eof {
                break;
            }
            out.push((l, buf.clone()));
        }
        assert_eq!(consumed, input.len() as u64);
        out
    }

    #[test]
    fn lines_with_and_without_final_newline() {
        let got = lines(b"ab\r\n\ncdefgh\nij", 100);
        assert_eq!(
            got,
            [
                (Line::Complete { newline: true }, b"ab".to_vec()),
                (Line::Complete { newline: true }, b"".to_vec()),
                (Line::Complete { newline: true }, b"cdefgh".to_vec()),
                (Line::Complete { newline: false }, b"ij".to_vec()),
            ]
        );
    }

    #[test]
    fn long_lines_are_skipped_not_kept() {
        let got = lines(b"12345\n123456\n1234\r\n123456789", 5);
        assert_eq!(
            got,
            [
                (Line::Complete { newline: true }, b"12345".to_vec()),
                (Line::TooLong, vec![]),
                (Line::Complete { newline: true }, b"1234".to_vec()),
                (Line::TooLong, vec![]),
            ]
        );
        // Exactly the cap plus a `\r\n` ending is fine; the cap plus one byte is not.
        assert_eq!(lines(b"12345\r\n", 5)[0].0, Line::Complete { newline: true });
        assert_eq!(lines(b"123456\r\n", 5)[0].0, Line::TooLong);
        assert_eq!(lines(b"123456", 5)[0].0, Line::TooLong);
    }

    #[test]
    fn capped_documents() {
        let mut buf = Vec::new();
        let mut n = 0;
        assert!(read_capped(&b"12345"[..], &mut buf, 5, &mut n).unwrap());
        assert_eq!(buf, b"12345");
        assert!(!read_capped(&b"123456"[..], &mut buf, 5, &mut n).unwrap());
        assert!(buf.is_empty());
    }
}
