//! # stencil-derive
//!
//! `#[derive(Tool)]`, re-exported by `stencil-tools` as `stencil_tools::Tool`: use it from
//! there (the generated code names `::stencil_tools`), never from this crate directly.
//!
//! - On a **struct with named fields** (the tool's arguments) it implements
//!   `stencil_tools::Tool` (name, description, argument schema) and `stencil_tools::Tools`
//!   (a set of one tool; a call deserializes into the struct). The struct must also derive
//!   `schemars::JsonSchema` and `serde::Deserialize`: the argument schema comes from
//!   `schemars` (field doc comments become property descriptions) and the typed call from
//!   `serde`.
//!   - The name is the type name in snake case (`GetWeather` → `get_weather`), or
//!     `#[tool(name = "...")]`.
//!   - The description is the type's doc comment, or `#[tool(description = "...")]`.
//! - On an **enum whose variants each wrap one tool type** (`Weather(GetWeather)`) it
//!   implements `stencil_tools::Tools`: the set of the variants' tools, and a call
//!   `(name, arguments)` deserialized into the variant of that name.
//!
//! See the `stencil-tools` crate documentation for examples.

use heck::ToSnakeCase;
use proc_macro2::TokenStream;
use quote::quote;
use syn::{parse_macro_input, Attribute, Data, DeriveInput, Expr, ExprLit, Fields, Lit, LitStr, Meta};

/// Derives `stencil_tools::Tool` and `stencil_tools::Tools` for a struct of arguments, or
/// `stencil_tools::Tools` for an enum of tools. See the crate documentation.
#[proc_macro_derive(Tool, attributes(tool))]
pub fn derive_tool(input: proc_macro::TokenStream) -> proc_macro::TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    expand(&input).unwrap_or_else(syn::Error::into_compile_error).into()
}

/// The `#[tool(...)]` options.
#[derive(Default)]
struct ToolAttrs {
    name: Option<LitStr>,
    description: Option<LitStr>,
}

fn tool_attrs(attrs: &[Attribute]) -> syn::Result<ToolAttrs> {
    let mut out = ToolAttrs::default();
    for attr in attrs.iter().filter(|a| a.path().is_ident("tool")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("name") {
                out.name = Some(meta.value()?.parse()?);
                Ok(())
            } else if meta.path.is_ident("description") {
                out.description = Some(meta.value()?.parse()?);
                Ok(())
            } else {
                Err(meta.error("unknown `tool` option: expected `name = \"...\"` or `description = \"...\"`"))
            }
        })?;
    }
    Ok(out)
}

/// The doc comment as rustdoc sees it: one line per `#[doc]`, one leading space removed,
/// surrounding blank lines trimmed.
fn doc_comment(attrs: &[Attribute]) -> String {
    let mut lines = Vec::new();
    for attr in attrs {
        if let Meta::NameValue(nv) = &attr.meta {
            if nv.path.is_ident("doc") {
                if let Expr::Lit(ExprLit { lit: Lit::Str(s), .. }) = &nv.value {
                    let value = s.value();
                    for line in value.split('\n') {
                        lines.push(line.strip_prefix(' ').unwrap_or(line).trim_end().to_string());
                    }
                }
            }
        }
    }
    lines.join("\n").trim().to_string()
}

/// The expansion, separate from the `proc_macro` entry point so that it can be unit-tested.
fn expand(input: &DeriveInput) -> syn::Result<TokenStream> {
    let attrs = tool_attrs(&input.attrs)?;
    match &input.data {
        Data::Struct(data) => match &data.fields {
            Fields::Named(_) => Ok(expand_struct(input, &attrs)),
            Fields::Unnamed(_) | Fields::Unit => Err(syn::Error::new_spanned(
                &input.ident,
                "#[derive(Tool)] needs a struct with named fields (the tool's arguments); \
                 for a tool without arguments write `struct Name {}`",
            )),
        },
        Data::Enum(data) => {
            if let Some(name) = attrs.name.as_ref().or(attrs.description.as_ref()) {
                return Err(syn::Error::new_spanned(
                    name,
                    "#[tool(...)] options go on the tool structs, not on an enum of tools",
                ));
            }
            let mut variants = Vec::new();
            for v in &data.variants {
                match &v.fields {
                    Fields::Unnamed(f) if f.unnamed.len() == 1 => {
                        variants.push((&v.ident, &f.unnamed[0].ty));
                    }
                    _ => {
                        return Err(syn::Error::new_spanned(
                            v,
                            "#[derive(Tool)] on an enum needs variants that each wrap one tool type, \
                             like `Weather(GetWeather)`",
                        ))
                    }
                }
            }
            if variants.is_empty() {
                return Err(syn::Error::new_spanned(&input.ident, "#[derive(Tool)] needs at least one variant"));
            }
            Ok(expand_enum(input, &variants))
        }
        Data::Union(_) => Err(syn::Error::new_spanned(&input.ident, "#[derive(Tool)] does not apply to unions")),
    }
}

fn expand_struct(input: &DeriveInput, attrs: &ToolAttrs) -> TokenStream {
    let ident = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    let name = attrs.name.as_ref().map(LitStr::value).unwrap_or_else(|| ident.to_string().to_snake_case());
    let description = attrs.description.as_ref().map(LitStr::value).unwrap_or_else(|| doc_comment(&input.attrs));
    quote! {
        impl #impl_generics ::stencil_tools::Tool for #ident #ty_generics #where_clause {
            const NAME: &'static str = #name;
            const DESCRIPTION: &'static str = #description;
        }

        impl #impl_generics ::stencil_tools::Tools for #ident #ty_generics #where_clause {
            fn definitions() -> ::std::vec::Vec<::stencil_tools::ToolDefinition> {
                ::std::vec![<Self as ::stencil_tools::Tool>::definition()]
            }

            fn from_call(call: &::stencil_tools::ToolCall) -> ::std::result::Result<Self, ::stencil_tools::CallError> {
                ::stencil_tools::deserialize_call::<Self>(call)
            }
        }
    }
}

fn expand_enum(input: &DeriveInput, variants: &[(&syn::Ident, &syn::Type)]) -> TokenStream {
    let ident = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    let definitions = variants.iter().map(|(_, ty)| quote! { <#ty as ::stencil_tools::Tool>::definition() });
    let names = variants.iter().map(|(_, ty)| quote! { <#ty as ::stencil_tools::Tool>::NAME });
    let arms = variants.iter().map(|(v, ty)| {
        quote! {
            if call.name == <#ty as ::stencil_tools::Tool>::NAME {
                return ::stencil_tools::deserialize_call::<#ty>(call).map(Self::#v);
            }
        }
    });
    quote! {
        impl #impl_generics ::stencil_tools::Tools for #ident #ty_generics #where_clause {
            fn definitions() -> ::std::vec::Vec<::stencil_tools::ToolDefinition> {
                ::std::vec![#(#definitions),*]
            }

            fn from_call(call: &::stencil_tools::ToolCall) -> ::std::result::Result<Self, ::stencil_tools::CallError> {
                #(#arms)*
                ::std::result::Result::Err(::stencil_tools::CallError::UnknownTool {
                    name: call.name.clone(),
                    known: ::std::vec![#(::std::string::String::from(#names)),*],
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expand_str(src: &str) -> Result<String, String> {
        let input: DeriveInput = syn::parse_str(src).unwrap();
        expand(&input).map(|t| t.to_string()).map_err(|e| e.to_string())
    }

    #[test]
    fn struct_name_is_snake_case_and_description_is_the_doc_comment() {
        let out = expand_str("/// Current weather.\n///\n/// In a city.\nstruct GetWeather { city: String }").unwrap();
        assert!(out.contains(r#"const NAME : & 'static str = "get_weather""#), "{out}");
        assert!(out.contains(r#"const DESCRIPTION : & 'static str = "Current weather.\n\nIn a city.""#), "{out}");
        assert!(out.contains("impl :: stencil_tools :: Tools for GetWeather"), "{out}");
    }

    #[test]
    fn attributes_override_name_and_description() {
        let out = expand_str(
            r#"/// Ignored. 
            #[tool(name = "weather", description = "Weather now")] struct GetWeather { city: String }"#,
        )
        .unwrap();
        assert!(out.contains(r#"= "weather""#), "{out}");
        assert!(out.contains(r#"= "Weather now""#), "{out}");
    }

    #[test]
    fn enum_dispatches_on_each_variant_tool_name() {
        let out = expand_str("enum Calls { Weather(GetWeather), Search(WebSearch) }").unwrap();
        assert!(out.contains("if call . name == < GetWeather as :: stencil_tools :: Tool > :: NAME"), "{out}");
        assert!(out.contains("map (Self :: Search)"), "{out}");
        assert!(out.contains("UnknownTool"), "{out}");
        assert!(!out.contains("impl :: stencil_tools :: Tool for"), "an enum is a set, not a tool: {out}");
    }

    #[test]
    fn bad_shapes_are_compile_errors() {
        for (src, needle) in [
            ("struct T(String);", "named fields"),
            ("struct T;", "named fields"),
            ("enum E { A, B(X) }", "wrap one tool type"),
            ("enum E { A(X, Y) }", "wrap one tool type"),
            ("enum E {}", "at least one variant"),
            ("union U { a: u32 }", "unions"),
            (r#"#[tool(name = "x")] enum E { A(X) }"#, "on the tool structs"),
            (r#"#[tool(title = "x")] struct T { a: u32 }"#, "unknown `tool` option"),
        ] {
            let err = expand_str(src).unwrap_err();
            assert!(err.contains(needle), "{src}: {err}");
        }
    }

    #[test]
    fn generics_are_kept() {
        let out = expand_str("struct Find<T> { query: T }").unwrap();
        assert!(out.contains("impl < T > :: stencil_tools :: Tool for Find < T >"), "{out}");
    }
}
