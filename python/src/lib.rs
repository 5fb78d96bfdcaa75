//! Python bindings of Zermelo (`import zermelo`): the native part, `zermelo._zermelo`. The
//! Python package (`zermelo/__init__.py`) wraps it: FEN strings or `chess.Board` objects in,
//! dictionaries and numbers out.
//!
//! It reads the tables exactly as `zermelo probe` does (the same answers, the same JSON) and
//! builds them as `zermelo solve` does (the same files). The interpreter's lock is released
//! while it works.

use std::path::{Path, PathBuf};

use pyo3::create_exception;
use pyo3::exceptions::{PyFileNotFoundError, PyKeyError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use zermelo_chess::probe::{self, moves, value};
use zermelo_chess::{Material, Value};
use zermelo_cli::probe::{
    dtm_line, fill_dtz50, halfmove_clock, lichess_dtz, parse_position, probe_position, ProbeFailure,
};
use zermelo_cli::MAX_MEN;
use zermelo_worker::tables::{TableDir, TableError, ThreadCached};

create_exception!(
    zermelo,
    MissingTableError,
    PyKeyError,
    "A table needed for the probe is not in the tablebase's directories (a KeyError, as python-chess's)."
);

/// The Python exception for a probe that could not be answered: `ValueError` for a FEN that is
/// not a legal position, `KeyError` for a position no table holds (castling rights, too many
/// men), `MissingTableError` (a `KeyError`) for a missing table, `RuntimeError` for a damaged one.
fn failure(e: ProbeFailure) -> PyErr {
    match e {
        ProbeFailure::Input(m) => PyValueError::new_err(m),
        ProbeFailure::NotInTables(m) => PyKeyError::new_err(m),
        ProbeFailure::Table(t @ TableError::Missing { .. }) => MissingTableError::new_err(t.to_string()),
        ProbeFailure::Table(t) => PyRuntimeError::new_err(t.to_string()),
    }
}

/// The tables of a list of directories, searched in order.
#[pyclass(frozen)]
struct Tables {
    dir: TableDir,
    /// The DTZ50 tables (`.zdz`) of the same directories.
    dtz: TableDir,
    /// The WDL50 tables (`.zwl`) of the same directories.
    wdl: TableDir,
}

#[pymethods]
impl Tables {
    #[new]
    fn new(dirs: Vec<PathBuf>) -> PyResult<Tables> {
        if dirs.is_empty() {
            return Err(PyValueError::new_err("no tables directory given"));
        }
        if let Some(d) = dirs.iter().find(|d| !d.is_dir()) {
            return Err(PyFileNotFoundError::new_err(format!(
                "tables directory {} does not exist",
                d.display()
            )));
        }
        let dir = TableDir::from_list(&dirs);
        Ok(Tables {
            dtz: dir.dtz50_view(),
            wdl: dir.wdl50_view(),
            dir,
        })
    }

    /// The answer of `zermelo probe` for `fen`, as its JSON text.
    fn probe_json(&self, py: Python<'_>, fen: &str) -> PyResult<String> {
        py.detach(|| {
            let pos = parse_position(fen, MAX_MEN)?;
            let mut info = probe_position(fen, &pos, &ThreadCached(&self.dir))?;
            fill_dtz50(&mut info, &pos, halfmove_clock(fen), &ThreadCached(&self.dtz))?;
            Ok(serde_json::to_string(&info).expect("an answer serializes"))
        })
        .map_err(failure)
    }

    /// `(wdl, dtm)` of `fen` for the side to move: wdl 2, 0 or -2 (win, draw, loss), dtm the
    /// signed plies to mate (0 when checkmated now, `None` for a draw).
    fn value(&self, py: Python<'_>, fen: &str) -> PyResult<(i32, Option<i32>)> {
        py.detach(|| {
            let pos = parse_position(fen, MAX_MEN)?;
            let v = value(&pos, &ThreadCached(&self.dir))?;
            let wdl = match v {
                Value::Win(_) => 2,
                Value::Draw => 0,
                Value::Loss(_) => -2,
            };
            Ok((wdl, v.dtm()))
        })
        .map_err(failure)
    }

    /// `(wdl50, dtz)` of `fen` for the side to move with the halfmove clock at 0, from the DTZ50
    /// tables: wdl50 2, 1 (cursed win), 0, -1 (blessed loss), -2 as python-chess numbers it, dtz
    /// the signed plies to the next zeroing move or mate (exact; -1 when checkmated now, as
    /// python-chess gives it). A missing table raises `MissingTableError` naming `zermelo dtz`.
    fn dtz50(&self, py: Python<'_>, fen: &str) -> PyResult<(i32, i32)> {
        py.detach(|| {
            let pos = parse_position(fen, MAX_MEN).map_err(failure)?;
            match probe::dtz(&pos, &ThreadCached(&self.dtz)) {
                Ok(v) => Ok((i32::from(v.wdl50()), lichess_dtz(v))),
                Err(TableError::Missing { material, dir }) => Err(MissingTableError::new_err(format!(
                    "no DTZ50 table {material}.zdz in {} (build it with `zermelo dtz {material} --tables DIR`)",
                    dir.display()
                ))),
                Err(e) => Err(failure(ProbeFailure::Table(e))),
            }
        })
    }

    /// The WDL50 class of `fen` for the side to move with the halfmove clock at 0, from the
    /// WDL50 tables (`.zwl`, written by `zermelo dtz` beside the DTZ50 tables, a fraction of
    /// their size): 2, 1 (cursed win), 0, -1 (blessed loss), -2 as python-chess numbers it. A
    /// missing table raises `MissingTableError`.
    fn wdl50(&self, py: Python<'_>, fen: &str) -> PyResult<i32> {
        py.detach(|| {
            let pos = parse_position(fen, MAX_MEN).map_err(failure)?;
            match probe::wdl50(&pos, &ThreadCached(&self.wdl)) {
                Ok(v) => Ok(i32::from(v)),
                Err(TableError::Missing { material, dir }) => Err(MissingTableError::new_err(format!(
                    "no WDL50 table {material}.zwl in {} (`zermelo dtz {material} --tables DIR` writes it)",
                    dir.display()
                ))),
                Err(e) => Err(failure(ProbeFailure::Table(e))),
            }
        })
    }

    /// The best move of `fen` in UCI (the fastest mate, or the slowest loss, or a move that
    /// keeps the draw; ties in UCI order), `None` when there is no legal move.
    fn best_move(&self, py: Python<'_>, fen: &str) -> PyResult<Option<String>> {
        py.detach(|| {
            let pos = parse_position(fen, MAX_MEN)?;
            let list = moves(&pos, &ThreadCached(&self.dir))?;
            Ok(list.first().map(|(m, _)| m.uci()))
        })
        .map_err(failure)
    }

    /// Best play from `fen` to mate, in UCI: one move a ply, the last one mating; empty for a
    /// draw.
    fn mainline(&self, py: Python<'_>, fen: &str) -> PyResult<Vec<String>> {
        py.detach(|| {
            let pos = parse_position(fen, MAX_MEN)?;
            let line = dtm_line(&pos, &ThreadCached(&self.dir))?;
            Ok(line.iter().map(|(m, _)| m.uci()).collect())
        })
        .map_err(failure)
    }
}

/// Builds each material (any order and case, at most 7 men) and every material it converts
/// into in `directory`, skipping tables already complete there; returns the materials built
/// (not those skipped). `threads`: default all cores; `memory`: bytes, default three quarters
/// of the machine's (or container's) memory.
#[pyfunction]
#[pyo3(signature = (materials, directory, threads=None, memory=None))]
fn solve(
    py: Python<'_>,
    materials: Vec<String>,
    directory: &str,
    threads: Option<usize>,
    memory: Option<u64>,
) -> PyResult<Vec<String>> {
    let parsed = materials_of(&materials)?;
    let threads = threads_or_all(threads)?;
    let budget = zermelo_cli::memory::budget(memory);
    let outcomes = py
        .detach(|| zermelo_cli::build::build(&parsed, Path::new(directory), threads, budget, &|_, _, _| {}))
        .map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    Ok(outcomes
        .iter()
        .filter(|o| !o.skipped)
        .map(|o| o.material.to_string())
        .collect())
}

/// Threads to use: `threads`, or all cores; 0 is refused.
fn threads_or_all(threads: Option<usize>) -> PyResult<usize> {
    match threads {
        Some(0) => Err(PyValueError::new_err("threads must be at least 1")),
        Some(n) => Ok(n),
        None => Ok(std::thread::available_parallelism().map_or(1, |n| n.get())),
    }
}

/// The materials named, parsed (at most [`MAX_MEN`] men).
fn materials_of(names: &[String]) -> PyResult<Vec<Material>> {
    names
        .iter()
        .map(|m| Material::parse_table(m, MAX_MEN).map_err(|e| PyValueError::new_err(e.to_string())))
        .collect()
}

/// Builds the DTZ50 tables (`.zdz`) of each material and of every material it converts into in
/// `directory`, skipping complete ones; returns the materials built.
#[pyfunction]
#[pyo3(signature = (materials, directory, threads=None))]
fn dtz(
    py: Python<'_>,
    materials: Vec<String>,
    directory: &str,
    threads: Option<usize>,
) -> PyResult<Vec<String>> {
    let parsed = materials_of(&materials)?;
    let threads = threads_or_all(threads)?;
    let built = py
        .detach(|| {
            let budget = zermelo_cli::memory::budget(None);
            zermelo_cli::dtz::build_dtz50(
                &parsed,
                &[Path::new(directory).to_path_buf()],
                threads,
                budget,
                &|_, _, _, _| {},
                |_| {},
            )
        })
        .map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    Ok(built
        .into_iter()
        .filter(|b| b.built)
        .map(|b| b.material)
        .collect())
}

#[pymodule]
fn _zermelo(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Tables>()?;
    m.add("MissingTableError", m.py().get_type::<MissingTableError>())?;
    m.add_function(wrap_pyfunction!(solve, m)?)?;
    m.add_function(wrap_pyfunction!(dtz, m)?)?;
    Ok(())
}
