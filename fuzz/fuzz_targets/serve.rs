//! `zermelo serve`'s HTTP router (cli/src/serve.rs), query strings and all: each input is the
//! target of a GET request (`/standard?fen=...`), sent with `tower::ServiceExt::oneshot` to the
//! router in a current-thread tokio runtime, over tables of KPvK, KQvK, KRvK, KBvK and KNvK
//! (DTM and DTZ50) built once at start-up.
//!
//! Asserts: no request panics (a panic in a handler's blocking task aborts: libfuzzer-sys's panic
//! hook); every answer is 200, 400 or 404 (a 500 is a damaged table or a panicked probe, and
//! these tables are whole); a JSON answer is valid JSON.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use axum::body::Body;
use axum::http::{header::CONTENT_TYPE, Request, StatusCode};
use axum::Router;
use libfuzzer_sys::fuzz_target;
use tower::ServiceExt;
use zermelo_chess::Material;
use zermelo_worker::tables::TableDir;

struct Server {
    runtime: tokio::runtime::Runtime,
    router: Router,
}

fn server() -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(|| {
        // scripts/fuzz.sh names a folder (on tmpfs when there is one) that it removes after.
        let dir = match std::env::var_os("ZERMELO_FUZZ_TMP") {
            Some(base) => tempfile::tempdir_in(base),
            None => tempfile::tempdir(),
        };
        let dir: PathBuf = dir.expect("a temporary folder").keep();
        let targets: Vec<Material> = ["KPvK", "KQvK"].iter().map(|m| m.parse().unwrap()).collect();
        zermelo_cli::build::build(&targets, &dir, 1, 1 << 30, &|_, _, _| {}).expect("building the tables");
        zermelo_cli::dtz::build_dtz50(&targets, &[dir.clone()], 1, 1 << 30, &|_, _, _, _| {}, |_| {})
            .expect("building the DTZ50 tables");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a tokio runtime");
        Server {
            runtime,
            router: zermelo_cli::serve::router(TableDir::new(dir)),
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let server = server();
    let Ok(target) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(request) = Request::get(target).body(Body::empty()) else {
        return;
    };
    let (status, json, body) = server.runtime.block_on(async {
        let response = server
            .router
            .clone()
            .oneshot(request)
            .await
            .expect("the router is infallible");
        let status = response.status();
        let json = response
            .headers()
            .get(CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("the body");
        (status, json, body)
    });
    assert!(
        matches!(
            status,
            StatusCode::OK | StatusCode::BAD_REQUEST | StatusCode::NOT_FOUND
        ),
        "GET {target:?}: {status} {}",
        String::from_utf8_lossy(&body)
    );
    if json {
        if let Err(e) = serde_json::from_slice::<serde_json::Value>(&body) {
            panic!("GET {target:?}: the JSON answer does not parse: {e}");
        }
    }
});
