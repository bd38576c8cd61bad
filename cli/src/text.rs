//! Showing bytes and places in a text to a person.

/// `bytes` in double quotes, with valid UTF-8 shown as text (escaping quotes, backslashes
/// and control characters as Rust does) and other bytes as `\xHH`.
pub fn escape(bytes: &[u8]) -> String {
    let mut out = String::from("\"");
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            out.extend(c.escape_debug());
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02X}"));
        }
    }
    out.push('"');
    out
}

/// The line of `text` that holds byte `offset`, as (1-based line, 1-based column in
/// characters, the line shown, the padding that puts a caret under the column). A long
/// line is cut to a window around the column, marked with `...`.
pub fn locate(text: &[u8], offset: usize) -> (usize, usize, String, String) {
    let offset = offset.min(text.len());
    let line_start = text[..offset].iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let line_end = text[offset..].iter().position(|&b| b == b'\n').map_or(text.len(), |i| offset + i);
    let line_no = text[..line_start].iter().filter(|&&b| b == b'\n').count() + 1;
    let line = String::from_utf8_lossy(&text[line_start..line_end]);
    let line = line.strip_suffix('\r').unwrap_or(&line);
    let before = String::from_utf8_lossy(&text[line_start..offset]);
    let chars: Vec<char> = line.chars().collect();
    let col = before.chars().count().min(chars.len());
    const BEFORE: usize = 50;
    const WIDTH: usize = 100;
    let start = col.saturating_sub(BEFORE);
    let end = chars.len().min(start + WIDTH);
    let mut shown = String::new();
    let mut pad = String::new();
    if start > 0 {
        shown.push_str("...");
        pad.push_str("   ");
    }
    for (i, &c) in chars[start..end].iter().enumerate() {
        let c = if c.is_control() && c != '\t' { '\u{FFFD}' } else { c };
        shown.push(c);
        if start + i < col {
            pad.push(if c == '\t' { '\t' } else { ' ' });
        }
    }
    if end < chars.len() {
        shown.push_str("...");
    }
    (line_no, col + 1, shown, pad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes() {
        assert_eq!(escape(b"a\"b\n"), r#""a\"b\n""#);
        assert_eq!(escape(&[b'x', 0xE3, 0x81]), r#""x\xE3\x81""#);
        assert_eq!(escape("é".as_bytes()), "\"é\"");
    }

    #[test]
    fn locates() {
        let (l, c, shown, pad) = locate(b"ab\n\tcd", 5);
        assert_eq!((l, c, shown.as_str(), pad.as_str()), (2, 3, "\tcd", "\t "));
        let (l, c, _, pad) = locate(b"{\"a\":}", 5);
        assert_eq!((l, c, pad.len()), (1, 6, 5));
    }
}
