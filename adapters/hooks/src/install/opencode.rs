//! opencode's side: a small plugin file (`plugin.js`) whose `tool.execute.before` asks
//! `agentwatch hook opencode` and throws its reason. opencode loads every `*.js` of
//! `$XDG_CONFIG_HOME/opencode/plugin/` (a project's `.opencode/plugin/`) without a `plugin`
//! entry in `opencode.json` (checked with opencode 1.18.33). The file is ours whole: its first
//! line says so, and its `AGENTWATCH` constant names the binary.

use std::path::{Path, PathBuf};

const TEMPLATE: &str = include_str!("plugin.js");
const PLACEHOLDER: &str = "\"@BINARY@\"";
/// The first line of every plugin we write.
const FIRST_LINE: &str = "// agentwatch: refuses a tool call that repeats a loop, before it runs.";
const BINARY_LINE: &str = "const AGENTWATCH = ";

/// The plugin asking `binary`.
pub(crate) fn plugin_text(binary: &Path) -> String {
    let quoted = serde_json::Value::String(binary.to_string_lossy().into_owned()).to_string();
    TEMPLATE.replacen(PLACEHOLDER, &quoted, 1)
}

/// Whether a file's text is a plugin we wrote.
pub(crate) fn is_ours(text: &str) -> bool {
    text.lines().next() == Some(FIRST_LINE)
}

/// The binary our plugin asks.
pub(crate) fn plugin_binary(text: &str) -> Option<PathBuf> {
    let line = text.lines().find_map(|l| l.strip_prefix(BINARY_LINE))?;
    let literal = line.trim_end().strip_suffix(';')?;
    serde_json::from_str::<String>(literal)
        .ok()
        .map(PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plugin_names_its_binary_and_reads_as_ours() {
        for path in ["/usr/bin/agentwatch", "/home/a \"b\"/agentwatch\\x"] {
            let text = plugin_text(Path::new(path));
            assert!(is_ours(&text));
            assert_eq!(plugin_binary(&text), Some(PathBuf::from(path)));
            assert!(!text.contains("@BINARY@"));
        }
        assert!(!is_ours("export const Mine = async () => ({});\n"));
    }
}
