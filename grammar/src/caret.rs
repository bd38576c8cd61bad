//! Pointing at a place in a line of text, for error messages.

/// The part of `line` around the 1-based character column `col` (at most 100
/// characters, with `...` where cut), and the padding that puts a caret under `col`
/// (tabs kept, wide characters counted twice, so that it lines up in a terminal).
///
/// ```
/// let (shown, pad) = stencil_grammar::caret_window("root ::= foo", 10);
/// assert_eq!(format!("{shown}\n{pad}^"), "root ::= foo\n         ^");
/// ```
pub fn caret_window(line: &str, col: usize) -> (String, String) {
    const BEFORE: usize = 50;
    const WIDTH: usize = 100;
    let chars: Vec<char> = line.chars().collect();
    let at = col.saturating_sub(1).min(chars.len());
    let start = at.saturating_sub(BEFORE);
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
        if start + i < at {
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
    (shown, pad)
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
