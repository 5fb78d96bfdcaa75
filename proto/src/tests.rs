use prost::Message;

use super::*;

fn key(material: &str, white_pawns: u64, black_pawns: u64) -> SliceKey {
    SliceKey {
        material: material.to_owned(),
        white_pawns,
        black_pawns,
    }
}

fn slice_ref(key: SliceKey, hash: &[u8]) -> SliceRef {
    SliceRef {
        key: Some(key),
        hash: hash.to_vec(),
    }
}

fn round_trip<M: Message + Default + PartialEq + std::fmt::Debug>(message: &M) {
    let bytes = message.encode_to_vec();
    assert_eq!(bytes.len(), message.encoded_len());
    let back = M::decode(bytes.as_slice()).expect("decodes");
    assert_eq!(&back, message);
}

#[test]
fn messages_round_trip_through_prost() {
    round_trip(&RegisterRequest {
        worker_name: "w1".into(),
        protocol_version: PROTOCOL_VERSION,
        cores: 2,
    });
    round_trip(&RegisterResponse {
        result: Some(register_response::Result::Registered(Registered {
            worker_id: 7,
            lease_ttl_ms: 30_000,
        })),
    });
    round_trip(&RegisterResponse {
        result: Some(register_response::Result::Refused(check_version(0).unwrap_err())),
    });
    round_trip(&LeaseTaskResponse {
        result: Some(lease_task_response::Result::Task(Task {
            lease_id: 3,
            lease_ttl_ms: 30_000,
            deadline_unix_ms: 1_800_000_000_000,
            job_id: 1,
            slices: vec![
                slice_ref(key("KPvKP", 1 << 12, 1 << 52), &[]),
                slice_ref(key("KPvKP", 1 << 13, 1 << 52), &[]),
            ],
            successors: vec![
                slice_ref(key("KQvKP", 0, 1 << 52), &[1; 32]),
                slice_ref(key("KPvK", 1 << 12, 0), &[2; 32]),
                slice_ref(key("KQvK", 0, 0), &[3; 32]),
            ],
            kind: TaskKind::Solve as i32,
            part: None,
        })),
    });
    round_trip(&LeaseTaskResponse {
        result: Some(lease_task_response::Result::Task(Task {
            lease_id: 5,
            lease_ttl_ms: 30_000,
            deadline_unix_ms: 1_800_000_000_000,
            job_id: 1,
            slices: vec![slice_ref(key("KRNvKNN", 0, 0), &[])],
            successors: vec![slice_ref(key("KRNvKN", 0, 0), &[5; 32])],
            kind: TaskKind::Solve as i32,
            part: Some(Part {
                group: 4,
                parts: 3,
                index: 2,
            }),
        })),
    });
    round_trip(&LeaseTaskResponse {
        result: Some(lease_task_response::Result::Task(Task {
            lease_id: 4,
            lease_ttl_ms: 30_000,
            deadline_unix_ms: 1_800_000_000_000,
            job_id: 1,
            slices: vec![slice_ref(key("KPvK", 1 << 12, 0), &[4; 32])],
            successors: vec![slice_ref(key("KQvK", 0, 0), &[3; 32])],
            kind: TaskKind::Verify as i32,
            part: None,
        })),
    });
    round_trip(&LeaseTaskResponse {
        result: Some(lease_task_response::Result::NoTask(NoTask {
            reason: no_task::Reason::Waiting as i32,
            retry_after_ms: 500,
        })),
    });
    round_trip(&HeartbeatRequest {
        worker_id: 7,
        lease_ids: vec![3, 4, u64::MAX],
    });
    round_trip(&HeartbeatResponse {
        valid_lease_ids: vec![3],
        lost_lease_ids: vec![4],
        lease_ttl_ms: 30_000,
        unknown_worker: false,
    });
    round_trip(&CompleteTaskRequest {
        worker_id: 7,
        lease_id: 3,
        slices: vec![SolvedSlice {
            slice: Some(slice_ref(key("KPvK", 1 << 12, 0), &(0..32).collect::<Vec<u8>>())),
            positions: 8192,
        }],
        verdict: None,
    });
    round_trip(&CompleteTaskRequest {
        worker_id: 8,
        lease_id: 4,
        slices: Vec::new(),
        verdict: Some(Verdict {
            agreed: false,
            slice: Some(key("KPvK", 1 << 12, 0)),
            index: 4097,
            reason: "derived: win in 3 plies".into(),
        }),
    });
    round_trip(&CompleteTaskResponse {
        result: Some(complete_task_response::Result::Rejected(Rejected {
            reason: "hash differs".into(),
        })),
    });
    round_trip(&UploadSliceChunk {
        lease_id: 3,
        chunk: Some(SliceChunk {
            header: Some(SliceHeader {
                key: Some(key("KPvK", 1 << 12, 0)),
                total_length: 4,
                content_hash: vec![0xab; 32],
                positions: 8192,
            }),
            data: vec![1, 2, 3, 4],
        }),
    });
    round_trip(&FetchSliceRequest {
        keys: vec![key("KQvK", 0, 0), key("KPvK", 1 << 8, 0)],
    });
    round_trip(&SubmitJobRequest {
        materials: vec!["KPvK".into(), "KPvKP".into()],
        roots: Vec::new(),
    });
    round_trip(&SubmitJobRequest {
        materials: Vec::new(),
        roots: vec![key("KPvKP", 1 << 27, 1 << 35)],
    });
    round_trip(&SubmitJobResponse {
        job_id: 1,
        slices_total: 1000,
        positions_total: 1 << 30,
    });
    round_trip(&JobStatusRequest { job_id: None });
    round_trip(&JobStatusRequest { job_id: Some(0) });
    round_trip(&JobStatusResponse {
        jobs: vec![JobInfo {
            job_id: 1,
            materials: vec!["KPvK".into()],
            state: JobState::Running as i32,
            slices_done: 10,
            slices_total: 29,
            positions_done: 10 * 8192,
            positions_total: 29 * 8192,
            positions_per_second: 1.5e6,
            error: String::new(),
        }],
        workers_alive: 2,
        bytes_uploaded: 3 << 20,
        bytes_fetched: 5 << 20,
        bytes_met: 7 << 20,
    });
    round_trip(&MeetChunk {
        header: Some(MeetHeader {
            worker_id: 2,
            lease_id: 5,
            round: 9,
        }),
        peer: 1,
        data: vec![1, 2, 3],
    });
}

/// Pawn bitboards are `fixed64`: a bitboard with high bits set costs 8 bytes, not a 10-byte
/// varint.
#[test]
fn pawn_bitboards_are_fixed_width() {
    let k = key("", 0x00ff_0000_0000_0000, 0x0000_0000_0000_ff00);
    assert_eq!(k.encoded_len(), 2 * (1 + 8));
    assert_eq!(k.raw(), [0x00ff_0000_0000_0000, 0x0000_0000_0000_ff00]);
}

/// `optional` in proto3 keeps "job 0" apart from "every job".
#[test]
fn job_status_request_tells_job_zero_from_every_job() {
    let all = JobStatusRequest::decode(JobStatusRequest { job_id: None }.encode_to_vec().as_slice()).unwrap();
    let zero =
        JobStatusRequest::decode(JobStatusRequest { job_id: Some(0) }.encode_to_vec().as_slice()).unwrap();
    assert_eq!(all.job_id, None);
    assert_eq!(zero.job_id, Some(0));
}

#[test]
fn version_refusal_names_both_versions() {
    assert_eq!(check_version(PROTOCOL_VERSION), Ok(()));
    let old = PROTOCOL_VERSION - 1;
    let refused = check_version(old).unwrap_err();
    assert_eq!(refused.coordinator_version, PROTOCOL_VERSION);
    assert_eq!(refused.worker_version, old);
    assert!(
        refused.reason.contains(&format!("version {old}")),
        "{}",
        refused.reason
    );
    assert!(
        refused.reason.contains(&format!("version {PROTOCOL_VERSION}")),
        "{}",
        refused.reason
    );
}

fn header(material: &str, data: &[u8]) -> SliceHeader {
    SliceHeader {
        key: Some(key(material, 1 << 12, 0)),
        total_length: data.len() as u64,
        content_hash: fake_hash(data),
        positions: 8192,
    }
}

/// A stand-in for the content hash: the framing never looks at it.
fn fake_hash(data: &[u8]) -> Vec<u8> {
    let mut h = vec![0u8; 32];
    for (i, b) in data.iter().enumerate() {
        h[i % 32] ^= b;
    }
    h
}

#[test]
fn slice_chunks_reassemble_at_every_chunk_size() {
    let slices: Vec<(SliceHeader, Vec<u8>)> = [0usize, 1, 5, 64, 1000]
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let data: Vec<u8> = (0..n).map(|j| (i * 31 + j) as u8).collect();
            (header(&format!("K{i}"), &data), data)
        })
        .collect();
    for chunk_size in [1, 2, 3, 7, 64, 999, 1000, 1 << 20] {
        let mut assembler = SliceAssembler::new();
        let mut out = Vec::new();
        let mut chunks = 0;
        for (h, data) in &slices {
            for chunk in slice_chunks(h.clone(), data, chunk_size) {
                assert!(chunk.data.len() <= chunk_size);
                chunks += 1;
                out.extend(assembler.push(chunk).unwrap());
            }
        }
        assembler.finish().unwrap();
        assert_eq!(out, slices, "chunk size {chunk_size}");
        let expected: usize = slices
            .iter()
            .map(|(_, d)| d.len().div_ceil(chunk_size).max(1))
            .sum();
        assert_eq!(chunks, expected, "chunk size {chunk_size}");
    }
}

#[test]
fn framing_errors_are_reported() {
    let data = b"0123456789";
    let h = header("KPvK", data);
    let chunk = |header: Option<SliceHeader>, data: &[u8]| SliceChunk {
        header,
        data: data.to_vec(),
    };

    let mut a = SliceAssembler::new();
    assert_eq!(a.push(chunk(None, b"x")), Err(FramingError::DataBeforeHeader));

    let mut a = SliceAssembler::new();
    assert_eq!(a.push(chunk(Some(h.clone()), &data[..4])), Ok(None));
    assert!(matches!(
        a.push(chunk(None, &data[..7])),
        Err(FramingError::TooLong {
            expected: 10,
            received: 11,
            ..
        })
    ));

    let mut a = SliceAssembler::new();
    assert_eq!(a.push(chunk(Some(h.clone()), &data[..4])), Ok(None));
    assert!(matches!(
        a.push(chunk(Some(h.clone()), b"")),
        Err(FramingError::Truncated {
            expected: 10,
            received: 4,
            ..
        })
    ));

    let mut a = SliceAssembler::new();
    assert_eq!(a.push(chunk(Some(h.clone()), &data[..9])), Ok(None));
    assert!(matches!(
        a.finish(),
        Err(FramingError::Truncated {
            expected: 10,
            received: 9,
            ..
        })
    ));

    let mut a = SliceAssembler::new();
    let no_key = SliceHeader {
        key: None,
        ..h.clone()
    };
    assert_eq!(a.push(chunk(Some(no_key), b"")), Err(FramingError::MissingKey));

    let mut a = SliceAssembler::with_limit(9);
    let err = a.push(chunk(Some(h), b"")).unwrap_err();
    assert!(matches!(
        err,
        FramingError::TooLarge {
            length: 10,
            limit: 9,
            ..
        }
    ));
    assert!(err.to_string().contains("KPvK[w=0x1000 b=0x0]"), "{err}");
}

/// The generated client and server work together over a real connection on loopback: a
/// registration with an old protocol version is refused, and a slice stream reassembles.
mod loopback {
    use std::pin::Pin;

    use tokio_stream::Stream;
    use tonic::{Request, Response, Status, Streaming};

    use super::*;
    use crate::coordinator_client::CoordinatorClient;
    use crate::coordinator_server::{Coordinator, CoordinatorServer};

    const SLICE: &[u8] = b"the bytes of one slice";

    struct Stub;

    #[tonic::async_trait]
    impl Coordinator for Stub {
        async fn register(
            &self,
            request: Request<RegisterRequest>,
        ) -> Result<Response<RegisterResponse>, Status> {
            let result = match check_version(request.get_ref().protocol_version) {
                Ok(()) => register_response::Result::Registered(Registered {
                    worker_id: 1,
                    lease_ttl_ms: 1000,
                }),
                Err(refused) => register_response::Result::Refused(refused),
            };
            Ok(Response::new(RegisterResponse { result: Some(result) }))
        }

        async fn lease_task(
            &self,
            _: Request<LeaseTaskRequest>,
        ) -> Result<Response<LeaseTaskResponse>, Status> {
            Err(Status::unimplemented("stub"))
        }

        async fn heartbeat(
            &self,
            _: Request<HeartbeatRequest>,
        ) -> Result<Response<HeartbeatResponse>, Status> {
            Err(Status::unimplemented("stub"))
        }

        async fn complete_task(
            &self,
            _: Request<CompleteTaskRequest>,
        ) -> Result<Response<CompleteTaskResponse>, Status> {
            Err(Status::unimplemented("stub"))
        }

        async fn upload_slice(
            &self,
            _: Request<Streaming<UploadSliceChunk>>,
        ) -> Result<Response<UploadSliceResponse>, Status> {
            Err(Status::unimplemented("stub"))
        }

        type FetchSliceStream = Pin<Box<dyn Stream<Item = Result<SliceChunk, Status>> + Send + 'static>>;

        async fn fetch_slice(
            &self,
            request: Request<FetchSliceRequest>,
        ) -> Result<Response<Self::FetchSliceStream>, Status> {
            let mut chunks = Vec::new();
            for key in request.into_inner().keys {
                let h = SliceHeader {
                    key: Some(key),
                    total_length: SLICE.len() as u64,
                    content_hash: vec![1; 32],
                    positions: 1,
                };
                chunks.extend(slice_chunks(h, SLICE, 4).map(Ok));
            }
            Ok(Response::new(Box::pin(tokio_stream::iter(chunks))))
        }

        async fn submit_job(
            &self,
            _: Request<SubmitJobRequest>,
        ) -> Result<Response<SubmitJobResponse>, Status> {
            Err(Status::unimplemented("stub"))
        }

        async fn job_status(
            &self,
            _: Request<JobStatusRequest>,
        ) -> Result<Response<JobStatusResponse>, Status> {
            Err(Status::unimplemented("stub"))
        }

        type MeetStream = Pin<Box<dyn Stream<Item = Result<MeetChunk, Status>> + Send + 'static>>;

        async fn meet(&self, _: Request<Streaming<MeetChunk>>) -> Result<Response<Self::MeetStream>, Status> {
            Err(Status::unimplemented("stub"))
        }
    }

    #[tokio::test]
    async fn generated_client_and_server_talk_over_loopback() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(CoordinatorServer::new(Stub))
                .serve_with_incoming_shutdown(
                    tokio_stream::wrappers::TcpListenerStream::new(listener),
                    async {
                        stopped.await.ok();
                    },
                ),
        );
        let mut client = CoordinatorClient::connect(format!("http://{addr}"))
            .await
            .unwrap();

        let old = RegisterRequest {
            worker_name: "old".into(),
            protocol_version: PROTOCOL_VERSION + 1,
            cores: 1,
        };
        let answer = client.register(old).await.unwrap().into_inner();
        let Some(register_response::Result::Refused(refused)) = answer.result else {
            panic!("an old worker was not refused: {answer:?}");
        };
        assert_eq!(refused.worker_version, PROTOCOL_VERSION + 1);

        let keys = vec![key("KPvK", 1 << 12, 0), key("KQvK", 0, 0)];
        let mut stream = client
            .fetch_slice(FetchSliceRequest { keys: keys.clone() })
            .await
            .unwrap()
            .into_inner();
        let mut assembler = SliceAssembler::new();
        let mut got = Vec::new();
        while let Some(chunk) = stream.message().await.unwrap() {
            got.extend(assembler.push(chunk).unwrap());
        }
        assembler.finish().unwrap();
        let got_keys: Vec<SliceKey> = got.iter().map(|(h, _)| h.key.clone().unwrap()).collect();
        assert_eq!(got_keys, keys);
        assert!(got.iter().all(|(_, bytes)| bytes == SLICE));

        let status = client
            .lease_task(LeaseTaskRequest { worker_id: 1 })
            .await
            .unwrap_err();
        assert_eq!(status.code(), tonic::Code::Unimplemented);

        stop.send(()).unwrap();
        server.await.unwrap().unwrap();
    }
}
