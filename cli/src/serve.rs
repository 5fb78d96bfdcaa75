//! `zermelo serve`: the tables over HTTP, with lichess's tablebase server contract.
//!
//! - `GET /standard?fen=FEN`: the answer of lichess's server (`tablebase.lichess.ovh/standard`,
//!   lila-tablebase): the same fields in the same order, the same meaning (`dtm` 0 for a draw,
//!   `null` for a position checkmated now; `dtw` and `dtc` always `null`), the same move order,
//!   plus the FEN asked and `ignores_50_move_rule`. `dtz` and `precise_dtz` hold the exact DTZ50
//!   and the category follows the 50-move rule with the FEN's halfmove clock where the DTZ50
//!   tables (`.zdz`) are; else they are `null` and the category follows the mates. FENs are read
//!   as lichess reads them ([`read_fen`]). A position no table holds (castling rights that
//!   stand, more men than tables have, a missing table) is answered 200 as lichess answers it:
//!   its values `null`, its moves valued where the position after them is in the tables,
//!   `"unknown"` otherwise ([`partial_answer`]).
//! - `GET /standard/mainline?fen=FEN`: the principal variation, by DTZ50 as lichess's where
//!   the DTZ50 tables are, else (or with `line=dtm`) the line to mate; empty for a draw; 404
//!   for a position no table holds.
//! - `GET /standard/squares?fen=FEN`: Church's co-ordinate squares of the FEN's pawns (kings
//!   and pawns only; its kings and side to move are ignored), as `zermelo squares --json`
//!   prints them, from the full table of the material (404 when it is not there: the server
//!   does not solve on request); `&format=svg`: the numbered diagram.
//! - `GET /materials`: the materials served with the sizes of their files (JSON); `GET
//!   /monitor`: one status line, in the shape of lichess's.
//! - `GET /`: the web page (`cli/web/`, built into the binary): a board with a FEN field, moves
//!   by drag and drop or clicks, the value of the position and of every move, the principal
//!   variation to step through, and a tab drawing the co-ordinate squares. It reads only this
//!   server. `GET /api` lists the endpoints.
//! - `GET /health`: `ok`; `GET /metrics`: Prometheus metrics (requests by endpoint and status,
//!   their latency, the process).
//!
//! Every answer but the metrics carries `Access-Control-Allow-Origin: *`, as lichess's API
//! documents, so that a page from any origin can call it. Errors are plain text, as lichess's:
//! 400 for a missing or invalid FEN, 404 for what no table holds where no partial answer is
//! given, 500 for a damaged table.
//!
//! Probes run on tokio's blocking threads, each reading the memory-mapped tables through its
//! own cache of decompressed blocks ([`ThreadCached`]): no lock is held per value. Every request
//! is logged (method, URI, status, microseconds). The server stops on ctrl-c or SIGTERM after
//! the requests in flight are answered.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, Request, State};
use axum::http::header::{ACCESS_CONTROL_ALLOW_ORIGIN, CONTENT_TYPE};
use axum::http::HeaderValue;
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use serde::{Deserialize, Serialize};
use tracing::info;
use zermelo_chess::dtz::RULE_PLIES;
use zermelo_chess::probe::{self, value};
use zermelo_chess::{Color, Dtz, Material, Position, Value};
use zermelo_worker::tables::{TableDir, TableError, ThreadCached};

use crate::lichess::{read_fen, Asked};
use crate::partial::partial_answer;
use crate::probe::{dtm_line, fill_dtz50, lichess_dtm, lichess_dtz, probe_position, whole, ProbeFailure};
use crate::squares;
use crate::MAX_MEN;

/// The default address: this machine only.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9000";

type Labels = Vec<(String, String)>;

/// The latency buckets, 100 µs to about 26 s.
fn latency() -> Histogram {
    Histogram::new(exponential_buckets(0.0001, 4.0, 10))
}

/// The server's metrics.
struct Metrics {
    registry: Registry,
    requests: Family<Labels, Counter>,
    seconds: Family<Labels, Histogram, fn() -> Histogram>,
}

impl Metrics {
    fn new() -> Metrics {
        let mut registry = Registry::default();
        let requests = Family::<Labels, Counter>::default();
        let seconds = Family::<Labels, Histogram, fn() -> Histogram>::new_with_constructor(latency);
        registry.register(
            "zermelo_http_requests",
            "HTTP requests answered, by endpoint and status",
            requests.clone(),
        );
        registry.register(
            "zermelo_http_request_seconds",
            "Time to answer an HTTP request, by endpoint",
            seconds.clone(),
        );
        Metrics {
            registry,
            requests,
            seconds,
        }
    }

    fn text(&self) -> String {
        let mut out = String::new();
        encode(&mut out, &self.registry).expect("writing to a string does not fail");
        // The process's own metrics (resident memory, CPU, ...), before the end marker.
        let mut t = zermelo_proto::exposition::Text::default();
        zermelo_proto::exposition::process_metrics(&mut t);
        let process = t.into_string();
        let ours = out.trim_end().strip_suffix("# EOF").unwrap_or(&out).to_string();
        ours + &process
    }
}

struct App {
    tables: TableDir,
    /// The DTZ50 tables of the same directories, where there are any.
    dtz: TableDir,
    metrics: Metrics,
}

#[derive(Deserialize)]
struct FenQuery {
    fen: Option<String>,
    /// `svg` for `/standard/squares`: the numbered diagram instead of JSON.
    format: Option<String>,
    /// `dtm` for `/standard/mainline`: the line to mate even where DTZ50 tables are.
    line: Option<String>,
}

/// An error answer as lichess's server gives one: its status and the message as plain text.
fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (
        status,
        [(CONTENT_TYPE, "text/plain; charset=utf-8")],
        message.into() + "\n",
    )
        .into_response()
}

/// The status of a probe that could not be answered, as lichess's server gives it: 400 for a
/// FEN that is not a legal position, 404 for a position no table holds (castling rights, too
/// many men, a missing table: only where no partial answer is given), 500 for a damaged table.
fn failure(e: ProbeFailure) -> Response {
    let status = match &e {
        ProbeFailure::Input(_) => StatusCode::BAD_REQUEST,
        ProbeFailure::NotInTables(_) | ProbeFailure::Table(TableError::Missing { .. }) => {
            StatusCode::NOT_FOUND
        }
        ProbeFailure::Table(_) => StatusCode::INTERNAL_SERVER_ERROR,
    };
    error(status, e.to_string())
}

/// Runs `f` on a blocking thread with the app, and answers with its JSON or its failure.
async fn blocking<T: Serialize + Send + 'static>(
    app: Arc<App>,
    query: Result<Query<FenQuery>, QueryRejection>,
    f: impl FnOnce(&App, &str, &Asked) -> Result<T, ProbeFailure> + Send + 'static,
) -> Response {
    blocking_with(
        app,
        query,
        |app, fen, asked, _| f(app, fen, asked),
        |v| Json(v).into_response(),
    )
    .await
}

/// [`blocking`] with the whole query given to `f`, and `answer` making the response of its value.
async fn blocking_with<T: Send + 'static>(
    app: Arc<App>,
    query: Result<Query<FenQuery>, QueryRejection>,
    f: impl FnOnce(&App, &str, &Asked, &FenQuery) -> Result<T, ProbeFailure> + Send + 'static,
    answer: impl FnOnce(T) -> Response,
) -> Response {
    let query = match query {
        Ok(Query(q)) => q,
        // A query string that does not parse (a repeated key, say): JSON too.
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("bad query string: {}", e.body_text()),
            )
        }
    };
    let Some(fen) = query.fen.clone() else {
        return error(StatusCode::BAD_REQUEST, "missing query parameter fen (?fen=FEN)");
    };
    let result = tokio::task::spawn_blocking(move || {
        let asked = read_fen(&fen).map_err(ProbeFailure::Input)?;
        f(&app, &fen, &asked, &query)
    })
    .await;
    match result {
        Ok(Ok(v)) => answer(v),
        Ok(Err(e)) => failure(e),
        Err(e) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the probe failed: {e}"),
        ),
    }
}

async fn standard(State(app): State<Arc<App>>, q: Result<Query<FenQuery>, QueryRejection>) -> Response {
    blocking(app, q, |app, fen, asked| {
        let (mates, dtz) = (ThreadCached(&app.tables), ThreadCached(&app.dtz));
        if let Ok(pos) = whole(asked, MAX_MEN) {
            match probe_position(fen, pos, &mates) {
                Ok(mut info) => {
                    fill_dtz50(&mut info, pos, asked.clock, &dtz)?;
                    return Ok(info);
                }
                Err(TableError::Missing { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        // As lichess answers a position no table holds: what its moves lead to, where known.
        Ok(partial_answer(fen, asked, &mates, &dtz)?)
    })
    .await
}

/// A step of the principal variation: the move, and the value after it for the side to move
/// there (as in a move of `/standard`).
#[derive(Serialize)]
struct Step {
    uci: String,
    san: String,
    dtz: Option<i32>,
    precise_dtz: Option<i32>,
    dtm: Option<i32>,
}

/// The principal variation, as lichess's `/standard/mainline` answers it: by DTZ50 where its
/// tables are ([`dtz_mainline`]), else (or with `line=dtm`) the line to mate with `dtz` and
/// `precise_dtz` `null`; `dtm` is the position's.
#[derive(Serialize)]
struct Mainline {
    mainline: Vec<Step>,
    /// `w` or `b` for the side that mates, `null` for a draw.
    winner: Option<char>,
    dtz: Option<i32>,
    precise_dtz: Option<i32>,
    dtm: Option<i32>,
}

/// Best play from `pos` to mate ([`dtm_line`]); nothing for a draw.
fn mainline(pos: &Position, src: &ThreadCached<'_>) -> Result<Mainline, TableError> {
    let v = value(pos, src)?;
    let side = |c: Color| if c == Color::White { 'w' } else { 'b' };
    let winner = match v {
        Value::Draw => None,
        Value::Win(_) => Some(side(pos.turn)),
        Value::Loss(_) => Some(side(pos.turn.other())),
    };
    let mut steps = Vec::new();
    let mut p = *pos;
    for (m, after) in dtm_line(pos, src)? {
        let san = p.san(&m);
        p = p.play(&m);
        steps.push(Step {
            uci: m.uci(),
            san,
            dtz: None,
            precise_dtz: None,
            dtm: lichess_dtm(after, p.is_checkmate()),
        });
    }
    Ok(Mainline {
        mainline: steps,
        winner,
        dtz: None,
        precise_dtz: None,
        dtm: lichess_dtm(v, pos.is_checkmate()),
    })
}

/// The most plies a DTZ50 line is followed (a line ends in mate, through its zeroing moves).
const MAX_LINE_PLIES: usize = 2000;

/// Best play under the 50-move rule, as lichess's mainline follows DTZ (lila-tablebase's
/// `mainline_blocking`): at each ply the move best by DTZ50 (the rule's result kept; the
/// winner's next zeroing move soonest, the loser's latest; then the mate distance; ties in UCI
/// order), through zeroing moves, until mate or until the halfmove clock (`clock` at `pos`, 0
/// after a capture or a pawn move, else one more a ply) reaches 100, where the rule has drawn a
/// cursed win; nothing for a draw. `None` when a DTZ50 table is missing. Each step has its
/// DTZ50 and DTM after the move; `winner` is the side that mated, if the line ends in mate.
fn dtz_mainline(
    pos: &Position,
    mut clock: u16,
    mates: &ThreadCached<'_>,
    dtz: &ThreadCached<'_>,
) -> Result<Option<Mainline>, TableError> {
    let missing = |e: &TableError| matches!(e, TableError::Missing { .. });
    let here = match probe::dtz(pos, dtz) {
        Ok(v) => v,
        Err(e) if missing(&e) => return Ok(None),
        Err(e) => return Err(e),
    };
    let v = value(pos, mates)?;
    let mut steps = Vec::new();
    let mut p = *pos;
    let mut winner = None;
    if here != Dtz::Draw {
        while steps.len() < MAX_LINE_PLIES && clock < RULE_PLIES {
            // The best move, with the values of the position after it (from its side to move).
            let mut best: Option<(zermelo_chess::Move, Position, Dtz, Value)> = None;
            for m in p.legal_moves().iter() {
                let after = p.play(m);
                let d = match probe::dtz(&after, dtz) {
                    Ok(d) => d,
                    Err(e) if missing(&e) => return Ok(None),
                    Err(e) => return Err(e),
                };
                let a = value(&after, mates)?;
                // Better for the mover: by DTZ50, then the mate; ties to the first in UCI order.
                let key = |m: &zermelo_chess::Move, d: Dtz, a: Value| {
                    (
                        d.after_move(m.leaves_slice()),
                        a.after_move(),
                        std::cmp::Reverse(m.uci()),
                    )
                };
                if best
                    .as_ref()
                    .is_none_or(|(bm, _, bd, ba)| key(m, d, a) > key(bm, *bd, *ba))
                {
                    best = Some((*m, after, d, a));
                }
            }
            let Some((m, after, d, a)) = best else {
                // Checkmated: the side that moved last mates.
                winner = Some(if p.turn == Color::White { 'b' } else { 'w' });
                break;
            };
            steps.push(Step {
                uci: m.uci(),
                san: p.san(&m),
                dtz: Some(lichess_dtz(d)),
                precise_dtz: Some(lichess_dtz(d)),
                dtm: lichess_dtm(a, after.is_checkmate()),
            });
            clock = if m.leaves_slice() { 0 } else { clock + 1 };
            p = after;
        }
    }
    Ok(Some(Mainline {
        mainline: steps,
        winner,
        dtz: Some(lichess_dtz(here)),
        precise_dtz: Some(lichess_dtz(here)),
        dtm: lichess_dtm(v, pos.is_checkmate()),
    }))
}

async fn standard_mainline(
    State(app): State<Arc<App>>,
    q: Result<Query<FenQuery>, QueryRejection>,
) -> Response {
    blocking_with(
        app,
        q,
        |app, _fen, asked, q| {
            // As lichess: 404 for a position no table holds, no partial line.
            let pos = whole(asked, MAX_MEN)?;
            let mates = ThreadCached(&app.tables);
            if q.line.as_deref() != Some("dtm") {
                if let Some(line) = dtz_mainline(pos, asked.clock, &mates, &ThreadCached(&app.dtz))? {
                    return Ok(line);
                }
            }
            Ok(mainline(pos, &mates)?)
        },
        |v| Json(v).into_response(),
    )
    .await
}

/// What `/standard/squares` answers: the squares as JSON, or the numbered diagram.
enum SquaresAnswer {
    Json(squares::CoordinateSquares),
    Svg(String),
}

async fn standard_squares(
    State(app): State<Arc<App>>,
    q: Result<Query<FenQuery>, QueryRejection>,
) -> Response {
    let work = |app: &App, fen: &str, asked: &Asked, q: &FenQuery| {
        let pos = &asked.pos;
        let svg = match q.format.as_deref() {
            None | Some("json") => false,
            Some("svg") => true,
            Some(other) => {
                return Err(ProbeFailure::Input(format!(
                    "unknown format '{other}': expected json or svg"
                )))
            }
        };
        let pawns = squares::pawns_of(pos).map_err(ProbeFailure::Input)?;
        let material = Material::of(&pos.board).normalized().0;
        // Only from a table already built: the server does not solve on request.
        app.tables.table_to_probe(&material)?;
        let src = ThreadCached(&app.tables);
        let mut failed = None;
        let values = squares::slice_values(&pawns, |p| {
            value(p, &src).map_err(|e| {
                let text = e.to_string();
                failed = Some(e);
                text
            })
        });
        if let Some(e) = failed {
            return Err(e.into());
        }
        let values = values.map_err(ProbeFailure::Input)?;
        let attacker = squares::attacker(&values).map_err(ProbeFailure::Input)?;
        let cs = squares::coordinate_squares(&values, attacker);
        Ok(if svg {
            SquaresAnswer::Svg(squares::summary_svg(&cs, &fen.replace('_', " ")))
        } else {
            SquaresAnswer::Json(cs)
        })
    };
    blocking_with(app, q, work, |answer| match answer {
        SquaresAnswer::Json(cs) => Json(cs).into_response(),
        SquaresAnswer::Svg(svg) => ([(CONTENT_TYPE, "image/svg+xml")], svg).into_response(),
    })
    .await
}

/// One table file served: its size in bytes.
#[derive(Serialize)]
struct TableFile {
    bytes: u64,
}

/// A material served: its DTM table (`.zmt`) and its DTZ50 table (`.zdz`) where there is one,
/// and whether the DTM table is open (mapped) now.
#[derive(Serialize)]
struct Served {
    material: String,
    men: u32,
    dtm: Option<TableFile>,
    dtz: Option<TableFile>,
    open: bool,
}

/// Every material with a table in the directories, the first directory's file where several
/// have one (as probes read them), fewest men first, then by name.
fn served(app: &App) -> Vec<Served> {
    let mut found: std::collections::BTreeMap<(u32, String), Served> = Default::default();
    for dir in app.tables.search_dirs() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            let Some((stem, ext)) = name.rsplit_once('.') else {
                continue;
            };
            let Ok(material) = Material::parse_table(stem, MAX_MEN) else {
                continue;
            };
            // Only a table's own name: the file a probe of the material opens.
            if material.to_string() != stem || !matches!(ext, "zmt" | "zdz") {
                continue;
            }
            let bytes = entry.metadata().map(|m| m.len()).unwrap_or(0);
            let s = found
                .entry((material.men(), stem.to_string()))
                .or_insert_with(|| Served {
                    material: stem.to_string(),
                    men: material.men(),
                    dtm: None,
                    dtz: None,
                    open: app.tables.is_open(&material),
                });
            let slot = if ext == "zmt" { &mut s.dtm } else { &mut s.dtz };
            if slot.is_none() {
                *slot = Some(TableFile { bytes });
            }
        }
    }
    found.into_values().collect()
}

/// The bytes of every table file served.
fn total_bytes(list: &[Served]) -> u64 {
    list.iter()
        .flat_map(|s| [&s.dtm, &s.dtz])
        .flatten()
        .map(|f| f.bytes)
        .sum()
}

/// `GET /materials`: the materials served, with the sizes of their files.
async fn materials(State(app): State<Arc<App>>) -> Response {
    let list = tokio::task::spawn_blocking(move || served(&app)).await;
    match list {
        Ok(list) => {
            let bytes = total_bytes(&list);
            Json(serde_json::json!({ "materials": list, "bytes": bytes })).into_response()
        }
        Err(e) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("listing the tables failed: {e}"),
        ),
    }
}

/// `GET /monitor`: a one-line status in the shape of lichess's (InfluxDB's line protocol): the
/// materials served, how many have DTZ50 tables, how many are open, the bytes of their files.
async fn monitor(State(app): State<Arc<App>>) -> Response {
    let app2 = Arc::clone(&app);
    let Ok(list) = tokio::task::spawn_blocking(move || served(&app2)).await else {
        return error(StatusCode::INTERNAL_SERVER_ERROR, "listing the tables failed");
    };
    let tables = list.iter().filter(|s| s.dtm.is_some()).count();
    let dtz = list.iter().filter(|s| s.dtz.is_some()).count();
    let bytes = total_bytes(&list);
    format!(
        "tablebase tables={tables}u,dtz_tables={dtz}u,open={}u,bytes={bytes}u",
        app.tables.open_count()
    )
    .into_response()
}

async fn metrics(State(app): State<Arc<App>>) -> Response {
    (
        [(
            CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        app.metrics.text(),
    )
        .into_response()
}

/// The web page: a board to explore the tables (`cli/web/`), with no outside host.
const PAGE_HTML: &str = include_str!("../web/index.html");
const PAGE_JS: &str = include_str!("../web/page.js");
const PAGE_CSS: &str = include_str!("../web/page.css");

async fn page() -> Response {
    ([(CONTENT_TYPE, "text/html; charset=utf-8")], PAGE_HTML).into_response()
}

async fn page_js() -> Response {
    ([(CONTENT_TYPE, "text/javascript; charset=utf-8")], PAGE_JS).into_response()
}

async fn page_css() -> Response {
    ([(CONTENT_TYPE, "text/css; charset=utf-8")], PAGE_CSS).into_response()
}

async fn api() -> &'static str {
    "Zermelo tablebase server\n\
     GET /                           the web page (a board to explore the tables)\n\
     GET /standard?fen=FEN           the position and its moves (lichess tablebase API shape)\n\
     GET /standard/mainline?fen=FEN  the principal variation to mate\n\
     GET /standard/squares?fen=FEN   co-ordinate squares of the pawns (JSON; &format=svg: the diagram)\n\
     GET /materials                  the materials served, with the sizes of their files (JSON)\n\
     GET /monitor                    one status line: tables, DTZ50 tables, open, bytes\n\
     GET /health                     ok\n\
     GET /metrics                    Prometheus metrics\n"
}

/// Logs every request and counts it in the metrics.
async fn observe(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    let start = Instant::now();
    let method = req.method().clone();
    let uri = req.uri().clone();
    let response = next.run(req).await;
    let endpoint = match uri.path() {
        p @ ("/" | "/page.js" | "/page.css" | "/api" | "/standard" | "/standard/mainline"
        | "/standard/squares" | "/materials" | "/monitor" | "/health" | "/metrics") => p,
        _ => "other",
    };
    let mut response = response;
    // Any web page may call the API, as lichess's documents (`Access-Control-Allow-Origin: *`);
    // the metrics are for the operator only.
    if endpoint != "/metrics" {
        response
            .headers_mut()
            .insert(ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    }
    let status = response.status().as_u16();
    let seconds = start.elapsed().as_secs_f64();
    let label = |k: &str, v: &str| (k.to_string(), v.to_string());
    app.metrics
        .requests
        .get_or_create(&vec![
            label("endpoint", endpoint),
            label("status", &status.to_string()),
        ])
        .inc();
    app.metrics
        .seconds
        .get_or_create(&vec![label("endpoint", endpoint)])
        .observe(seconds);
    info!(%method, %uri, status, micros = (seconds * 1e6) as u64, "request");
    response
}

/// The routes of the server over `tables` (public for the fuzz target of `fuzz/`).
pub fn router(tables: TableDir) -> Router {
    let app = Arc::new(App {
        dtz: tables.dtz50_view(),
        tables,
        metrics: Metrics::new(),
    });
    Router::new()
        .route("/", get(page))
        .route("/page.js", get(page_js))
        .route("/page.css", get(page_css))
        .route("/api", get(api))
        .route("/standard", get(standard))
        .route("/standard/mainline", get(standard_mainline))
        .route("/standard/squares", get(standard_squares))
        .route("/materials", get(materials))
        .route("/monitor", get(monitor))
        .route("/health", get(|| async { "ok\n" }))
        .route("/metrics", get(metrics))
        .fallback(|| async { error(StatusCode::NOT_FOUND, "no such endpoint; GET /api lists them") })
        .layer(middleware::from_fn_with_state(Arc::clone(&app), observe))
        .with_state(app)
}

/// Serves `tables` on `listen` until ctrl-c or SIGTERM; `ready` is called with the address
/// bound (the port chosen, for port 0).
pub async fn serve(
    tables: TableDir,
    listen: SocketAddr,
    ready: impl FnOnce(SocketAddr),
) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(listen).await?;
    let addr = listener.local_addr()?;
    // Before it says it is ready: a SIGTERM from then on stops it cleanly.
    let stop = crate::cluster::shutdown_signal();
    info!(%addr, tables = %tables.search_list().display(), "serving");
    ready(addr);
    axum::serve(listener, router(tables))
        .with_graceful_shutdown(stop)
        .await?;
    info!("stopped");
    Ok(())
}
