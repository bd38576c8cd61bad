//! Llama 3.x: bare JSON calls, `{"name": "NAME", "parameters": ARGUMENTS}` (as Llama 3.1–3.3
//! templates render an assistant's call), calls separated by `; `.
//!
//! ```text
//! {"name": "get_weather", "parameters": {"city": "Paris"}}
//! ```
//!
//! The call has no opening marker: its **trigger is `{"name": "`**, anywhere in the reply
//! (with `auto`, text may come first; that text cannot contain `{"name": "` itself). With
//! `<|python_tag|>` (`llama3-python-tag`, chosen when the template has the token: Llama 3.1
//! writes it before calls it makes in the `ipython` environment) a call may also be
//! preceded by `<|python_tag|>`, a second trigger. A `;` (with any whitespace) between two
//! calls is their separator, not content. Names are JSON-escaped. Reasoning, when asked
//! for, in `<think>…</think>` (Llama has no reasoning format of its own).

use serde_json::Value;

use super::build::{Builder, Piece};
use super::{FormatError, Role};
use crate::call::ToolCall;
use crate::envelope::name_and_quote;

pub(super) const TRIGGER: &str = "{\"name\": \"";

pub(super) fn build(b: &mut Builder, allowed: &[usize], python_tag: bool) -> Result<Value, FormatError> {
    let trigger = b.marker(TRIGGER);
    let tag = b.marker("<|python_tag|>");
    b.hold(";");
    let mut units = Vec::new();
    for &i in allowed {
        let name = format!("{}, \"parameters\": ", name_and_quote(b.name(i)));
        let end = Some(Piece::Text("}".into()));
        units.push(b.unit(
            std::slice::from_ref(&trigger),
            name.clone(),
            &[],
            vec![b.json_arguments(i)],
            end.clone(),
            Role::Call(i),
        )?);
        if python_tag {
            let before = [tag.clone(), trigger.clone()];
            units.push(b.unit(&before, name, &[], vec![b.json_arguments(i)], end, Role::Call(i))?);
        }
    }
    let triggers = if python_tag { vec![trigger, tag] } else { vec![trigger] };
    Ok(b.calls_in_text(&triggers, units, !b.spec.parallel))
}

pub(super) fn write(content: &str, calls: &[ToolCall]) -> String {
    let mut out = content.to_string();
    for (i, call) in calls.iter().enumerate() {
        out.push_str(match (i, content.is_empty()) {
            (0, true) => "",
            (0, false) => "\n",
            _ => "; ",
        });
        out.push_str(&format!("{TRIGGER}{}, \"parameters\": {}}}", name_and_quote(&call.name), call.arguments));
    }
    out
}
