//! `permitc compile`.

use super::*;

pub(in crate::cli) fn compile_cmd(path: &Path, output: &Path, format: Format, deny_warnings: bool) -> u8 {
    let out = match crate::compile::compile_package(path) {
        Ok(out) => out,
        Err(e) => return io_error(&e, format),
    };
    let (errors, warnings) = count(&out);
    match format {
        Format::Human => err!("{}", render(&out.diagnostics, &out.sources, colour())),
        Format::Json => print_json(&CompileJson {
            path: path.display().to_string(),
            errors,
            warnings,
            diagnostics: DiagnosticJson::all(&out),
        }),
    }
    let table = match out.table {
        Some(t) if errors == 0 && !(deny_warnings && warnings > 0) => t,
        _ => {
            if format == Format::Human {
                errln!("{}; no table written", summary(path, &Output { table: None, ..out }));
            }
            return 1;
        }
    };
    let bytes = table.to_pretty_json();
    if output == Path::new("-") {
        out!("{bytes}");
        return 0;
    }
    match write_atomically(output, bytes.as_bytes()) {
        Ok(()) => {
            if format == Format::Human {
                errln!("wrote `{}` (table digest {})", output.display(), &table.header.table_digest);
            }
            0
        }
        Err(e) => {
            errln!("error: cannot write `{}`: {e}", output.display());
            2
        }
    }
}
