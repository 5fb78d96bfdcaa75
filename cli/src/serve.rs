//! `zermelo serve`: the tables over HTTP, in the lichess tablebase API's shape.
//!
//! - `GET /standard?fen=FEN`: what `zermelo probe` prints for the FEN ([`ProbeInfo`]), the
//!   response of lichess's tablebase server (`tablebase.lichess.ovh/standard`): the same field
//!   names, types and meaning, and the same move order. `dtz` and `precise_dtz` hold the exact
//!   DTZ50 and the category follows the 50-move rule with the FEN's halfmove clock where the
//!   DTZ50 tables (`.zdz`) are; else they are `null`. Underscores may stand for the FEN's spaces.
//! - `GET /standard/mainline?fen=FEN`: the principal variation to mate (best play on both
//!   sides, the DTM line), each step in UCI and SAN; empty for a draw.
//! - `GET /standard/squares?fen=FEN`: Church's co-ordinate squares of the FEN's pawns (kings
//!   and pawns only; its kings and side to move are ignored), as `zermelo squares --json`
//!   prints them, from the full table of the material (404 when it is not there: the server
//!   does not solve on request).
//! - `GET /`: the web page (`cli/web/`, built into the binary): a board with a FEN field, moves
//!   by drag and drop or clicks, the value of the position and of every move, the principal
//!   variation to step through, and a tab drawing the co-ordinate squares. It reads only this
//!   server. `GET /api` lists the endpoints.
//! - `GET /standard/squares?fen=FEN&format=svg`: the numbered diagram of the co-ordinate
//!   squares (as `zermelo squares --svg` draws it).
//! - `GET /health`: `ok`; `GET /metrics`: Prometheus metrics (requests by endpoint and status,
//!   their latency, the process).
//!
//! Errors are JSON `{"error": ...}`: 400 for a missing or invalid FEN, or a position with more
//! men than the tables have; 404 for a material whose table is not in the directories (the
//! message names the `zermelo solve` command that builds it); 500 for a damaged table.
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
use axum::http::header::CONTENT_TYPE;
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
use zermelo_chess::probe::{self, moves, value};
use zermelo_chess::{Color, Dtz, Material, Position, Value};
use zermelo_worker::tables::{TableDir, TableError, ThreadCached};

use crate::probe::{fill_dtz50, halfmove_clock, parse_position, probe_position, ProbeFailure};
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

/// An error answer: `{"error": message}` with its status.
fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(serde_json::json!({ "error": message.into() }))).into_response()
}

/// The status of a probe that could not be answered.
fn failure(e: ProbeFailure) -> Response {
    let status = match &e {
        ProbeFailure::Input(_) => StatusCode::BAD_REQUEST,
        ProbeFailure::Table(TableError::Missing { .. }) => StatusCode::NOT_FOUND,
        ProbeFailure::Table(_) => StatusCode::INTERNAL_SERVER_ERROR,
    };
    error(status, e.to_string())
}

/// Runs `f` on a blocking thread with the app, and answers with its JSON or its failure.
async fn blocking<T: Serialize + Send + 'static>(
    app: Arc<App>,
    query: Result<Query<FenQuery>, QueryRejection>,
    f: impl FnOnce(&App, &str, &Position) -> Result<T, ProbeFailure> + Send + 'static,
) -> Response {
    blocking_with(
        app,
        query,
        |app, fen, pos, _| f(app, fen, pos),
        |v| Json(v).into_response(),
    )
    .await
}

/// [`blocking`] with the whole query given to `f`, and `answer` making the response of its value.
async fn blocking_with<T: Send + 'static>(
    app: Arc<App>,
    query: Result<Query<FenQuery>, QueryRejection>,
    f: impl FnOnce(&App, &str, &Position, &FenQuery) -> Result<T, ProbeFailure> + Send + 'static,
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
        let pos = parse_position(&fen, MAX_MEN)?;
        f(&app, &fen, &pos, &query)
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
    blocking(app, q, |app, fen, pos| {
        let mut info = probe_position(fen, pos, &ThreadCached(&app.tables))?;
        fill_dtz50(&mut info, pos, halfmove_clock(fen), &ThreadCached(&app.dtz))?;
        Ok(info)
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

/// Best play from `pos` to mate: at each ply the best move for the side to move (the fastest
/// mate, or the slowest loss; ties in UCI order); nothing for a draw.
fn mainline(pos: &Position, src: &ThreadCached<'_>) -> Result<Mainline, TableError> {
    let v = value(pos, src)?;
    let side = |c: Color| if c == Color::White { 'w' } else { 'b' };
    let (plies, winner) = match v {
        Value::Draw => (0, None),
        Value::Win(n) => (n, Some(side(pos.turn))),
        Value::Loss(n) => (n, Some(side(pos.turn.other()))),
    };
    let mut steps = Vec::new();
    let mut p = *pos;
    for _ in 0..plies {
        let Some((m, after)) = moves(&p, src)?.into_iter().next() else {
            break;
        };
        steps.push(Step {
            uci: m.uci(),
            san: p.san(&m),
            dtz: None,
            precise_dtz: None,
            dtm: after.dtm(),
        });
        p = p.play(&m);
    }
    Ok(Mainline {
        mainline: steps,
        winner,
        dtz: None,
        precise_dtz: None,
        dtm: v.dtm(),
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
                dtz: Some(d.signed()),
                precise_dtz: Some(d.signed()),
                dtm: a.dtm(),
            });
            clock = if m.leaves_slice() { 0 } else { clock + 1 };
            p = after;
        }
    }
    Ok(Some(Mainline {
        mainline: steps,
        winner,
        dtz: Some(here.signed()),
        precise_dtz: Some(here.signed()),
        dtm: v.dtm(),
    }))
}

async fn standard_mainline(
    State(app): State<Arc<App>>,
    q: Result<Query<FenQuery>, QueryRejection>,
) -> Response {
    blocking_with(
        app,
        q,
        |app, fen, pos, q| {
            let mates = ThreadCached(&app.tables);
            if q.line.as_deref() != Some("dtm") {
                let clock = halfmove_clock(fen);
                if let Some(line) = dtz_mainline(pos, clock, &mates, &ThreadCached(&app.dtz))? {
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
    let work = |app: &App, fen: &str, pos: &Position, q: &FenQuery| {
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
        app.tables.table(&material)?;
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
        | "/standard/squares" | "/health" | "/metrics") => p,
        _ => "other",
    };
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

/// The routes of the server over `tables`.
fn router(tables: TableDir) -> Router {
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
