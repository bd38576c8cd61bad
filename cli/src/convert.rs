//! `stencil convert`: a JSON Schema as an equivalent GBNF grammar that llama.cpp reads.
//!
//! The schema compiles into the IR ([`stencil_schema::compile_schema`]), its regex
//! terminals are rewritten as plain IR ([`stencil_grammar::lower_regexes`]), the result is
//! fitted to llama.cpp's parser with its start rule named `root`
//! ([`stencil_grammar::llama_cpp::rewrite`]), and the printer writes GBNF
//! ([`stencil_grammar::to_gbnf`], which only writes GBNF rule names).

use std::process::ExitCode;

use crate::error::CliError;
use crate::print_line;
use crate::source::{read_schema, SchemaFile};

pub fn run(schema: &SchemaFile) -> Result<ExitCode, CliError> {
    let document = read_schema(&schema.path)?;
    let compiled = stencil_schema::compile_schema(&document, &schema.options).map_err(|source| CliError::Schema {
        path: schema.path.clone(),
        mode: schema.options.mode,
        source: Box::new(source),
    })?;
    let grammar = stencil_grammar::lower_regexes(&compiled.grammar)
        .map_err(|source| CliError::Lower { path: schema.path.clone(), source })?;
    let grammar = stencil_grammar::llama_cpp::rewrite(&grammar);
    let text =
        stencil_grammar::to_gbnf(&grammar).map_err(|source| CliError::Print { path: schema.path.clone(), source })?;
    if !compiled.warnings.is_empty() {
        let n = compiled.warnings.len();
        let plural = if n == 1 { "" } else { "s" };
        eprintln!(
            "{}: {n} keyword{plural} the grammar does not enforce (validate outputs with `stencil validate`):",
            schema.path.display()
        );
        print_line(&format!("# Lenient conversion: {n} keyword{plural} this grammar does not enforce:"))?;
        for w in &compiled.warnings {
            let line = w.to_string().replace(['\n', '\r'], " ");
            eprintln!("  {line}");
            print_line(&format!("#   {line}"))?;
        }
    }
    // `text` ends with a newline.
    print_line(text.trim_end_matches('\n'))?;
    Ok(ExitCode::SUCCESS)
}
