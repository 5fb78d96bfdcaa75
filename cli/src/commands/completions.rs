//! `zermelo completions`.

use crate::*;

/// Print a shell completion script for zermelo.
///
/// For bash: `zermelo completions bash > ~/.local/share/bash-completion/completions/zermelo`;
/// zsh: into a directory of your `fpath` as `_zermelo`; fish: `~/.config/fish/completions/zermelo.fish`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// The shell.
    #[arg(value_enum)]
    pub(crate) shell: clap_complete::Shell,
}

pub(crate) fn run(args: Args, _show_bar: bool) -> Result<u8, Failure> {
    let Args { shell } = args;
    let mut out = std::io::stdout().lock();
    clap_complete::generate(shell, &mut Cli::command(), "zermelo", &mut out);
    out.flush()
        .map_err(|e| Failure::input(format!("writing output: {e}")))?;
    Ok(0)
}
