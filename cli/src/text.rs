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
    let col = before.chars().count().min(line.chars().count());
    let (shown, pad) = stencil_grammar::caret_window(line, col + 1);
    (line_no, col + 1, shown, pad)
}
