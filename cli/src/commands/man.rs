//! `zermelo man`.

use crate::*;

/// Print zermelo's man page (roff), or write one page per command into a directory.
///
/// `zermelo man | man -l -` reads it now; `zermelo man --dir ~/.local/share/man/man1` installs
/// zermelo.1 and zermelo-COMMAND.1 for every command.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Write zermelo.1 and zermelo-COMMAND.1 into DIR (created if missing) instead of
    /// printing zermelo.1.
    #[arg(long, value_name = "DIR")]
    pub(crate) dir: Option<PathBuf>,
}

pub(crate) fn run(args: Args, _show_bar: bool) -> Result<u8, Failure> {
    let Args { dir } = args;
    let cmd = Cli::command();
    match dir {
        Some(dir) => {
            std::fs::create_dir_all(&dir)
                .and_then(|()| clap_mangen::generate_to(cmd, &dir))
                .map_err(|e| Failure::input(format!("writing man pages into {}: {e}", dir.display())))?;
            eprintln!("man pages written into {}", dir.display());
        }
        None => {
            let mut out = std::io::stdout().lock();
            clap_mangen::Man::new(cmd)
                .render(&mut out)
                .and_then(|()| out.flush())
                .map_err(|e| Failure::input(format!("writing output: {e}")))?;
        }
    }
    Ok(0)
}
