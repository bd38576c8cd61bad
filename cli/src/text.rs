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
            match c {
                '\t' => pad.push('\t'),
                c if is_wide(c) => pad.push_str("  "),
                _ => pad.push(' '),
            }
        }
    }
    if end < chars.len() {
        shown.push_str("...");
    }
    (line_no, col + 1, shown, pad)
}

/// Characters most terminals show two columns wide (East Asian wide and fullwidth
/// characters, emoji), roughly.
fn is_wide(c: char) -> bool {
    matches!(c as u32,
        0x1100..=0x115F
        | 0x2E80..=0x303E
        | 0x3041..=0x33FF
        | 0x3400..=0x4DBF
        | 0x4E00..=0x9FFF
        | 0xA000..=0xA4CF
        | 0xAC00..=0xD7A3
        | 0xF900..=0xFAFF
        | 0xFE30..=0xFE4F
        | 0xFF00..=0xFF60
        | 0xFFE0..=0xFFE6
        | 0x1F300..=0x1F64F
        | 0x1F900..=0x1F9FF
        | 0x20000..=0x3FFFD)
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
        let (_, c, _, pad) = locate("ひらabc".as_bytes(), 6);
        assert_eq!((c, pad.as_str()), (3, "    "));
    }
}
