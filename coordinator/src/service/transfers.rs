//! Slices over the wire: uploads (checked before they are stored, see [`crate::check`]) and
//! fetches (served from the store, hash-checked out).

use super::*;

impl CoordinatorService {
    /// How an upload of slice `key` is watched as it arrives, for the check ([`crate::check`]).
    /// Blocking.
    pub(super) fn watch_upload_blocking(&self, key: &SliceKey, positions: u64) -> Result<Watch, StoreError> {
        let watch = self
            .shared
            .check
            .watch_blocking(key, positions, &StoreReader(self))
            .map_err(|reason| StoreError::FailedCheck { key: *key, reason })?;
        if matches!(watch, Watch::Stream(_)) {
            Counters::add(&self.shared.counters.slices_streamed, 1);
        }
        Ok(watch)
    }

    /// Checks an uploaded slice's values before it is accepted ([`crate::check`]), reading its
    /// successors from the store. Blocking.
    pub(super) fn check_upload_blocking(
        &self,
        key: &SliceKey,
        hash: &Hash,
        watch: Option<Watch>,
    ) -> Result<(), StoreError> {
        let c = &self.shared.counters;
        let Some(watch) = watch else {
            return Err(StoreError::FailedCheck {
                key: *key,
                reason: "the upload was not watched".into(),
            });
        };
        match self
            .shared
            .check
            .check_blocking(key, hash, watch, &StoreReader(self))
        {
            Ok(report) => {
                Counters::add(&c.slices_checked, 1);
                Counters::add(&c.positions_derived, report.derived);
                debug!(%key, derived = report.derived, skipped = report.skipped, "upload checked");
                Ok(())
            }
            Err(reason) => Err(StoreError::FailedCheck { key: *key, reason }),
        }
    }

    /// Refuses a worker from now on, saying `why` when it asks for work (an upload of it
    /// failed the check, a slice it solved was found wrong, a verdict of it was refuted); its
    /// leases go to others.
    pub(super) fn refuse_worker(&self, worker: WorkerId, why: &'static str) {
        let mut state = self.lock();
        state.refused.insert(worker, why);
        // Finishes no slice: nothing to journal, nothing to fail.
        let _ = self.drive(&mut state, Event::WorkerLost { worker });
    }

    pub(super) async fn upload(
        &self,
        request: Request<Streaming<pb::UploadSliceChunk>>,
    ) -> Result<Response<pb::UploadSliceResponse>, Status> {
        let mut stream = request.into_inner();
        // Each slice goes to a temporary file in the store as its chunks arrive, decoded and
        // hashed on the way: an upload of any size takes a few megabytes here.
        let mut framer = SliceFramer::with_limit(u64::MAX);
        let mut incoming: Option<(SliceKey, pb::SliceKey, IncomingSlice)> = None;
        let mut stored = Vec::new();
        let mut bytes = 0u64;
        // The slices the upload's lease allows: those of its task, if the lease is live.
        let mut allowed: Option<Vec<SliceKey>> = None;
        let mut uploader = None;
        while let Some(message) = stream.message().await? {
            if allowed.is_none() {
                let lease = LeaseId(message.lease_id);
                let Some((worker, slices)) = self.lock().scheduler.lease_holder(lease) else {
                    Counters::add(&self.shared.counters.not_allowed, 1);
                    warn!(%lease, "upload without a live lease refused");
                    return Err(Status::permission_denied(format!(
                        "{lease} is not a live lease: only the holder of a task's live lease uploads its slices"
                    )));
                };
                allowed = Some(slices);
                uploader = Some((worker, lease));
            }
            let Some(chunk) = message.chunk else { continue };
            bytes += chunk.data.len() as u64;
            Counters::add(&self.shared.counters.bytes_uploaded, chunk.data.len() as u64);
            let piece = framer.push(chunk).map_err(ServiceError::from)?;
            // A slice's first piece begins it (its header checked here), in the same blocking
            // call as its first values: a slice of one chunk takes one trip to the blocking pool.
            let (key, wire_key, begin, under_way) = match piece.header {
                Some(header) => {
                    let wire_key = header.key.clone().expect("the framer checks for a key");
                    let key = from_wire(&wire_key).map_err(ServiceError::from)?;
                    if !allowed.as_ref().is_some_and(|a| a.contains(&key)) {
                        Counters::add(&self.shared.counters.not_allowed, 1);
                        warn!(%key, "upload of a slice outside the lease's task refused");
                        return Err(Status::permission_denied(format!(
                            "slice {key} is not in the task of this upload's lease"
                        )));
                    }
                    if header.total_length > max_wire_bytes(header.positions) {
                        return Err(ServiceError::from(FramingError::TooLarge {
                            key: key.to_string(),
                            length: header.total_length,
                            limit: max_wire_bytes(header.positions),
                        })
                        .into());
                    }
                    (key, wire_key, Some(header), None)
                }
                None => {
                    let (key, wire_key, slice) = incoming.take().expect("a slice under way");
                    (key, wire_key, None, Some(slice))
                }
            };
            let complete = piece.complete;
            let data = piece.data;
            let this = self.clone();
            let put = tokio::task::spawn_blocking(move || -> Result<_, StoreError> {
                let mut slice = match (under_way, begin) {
                    (Some(slice), _) => slice,
                    (None, Some(header)) => {
                        let mut begun = this.shared.store.begin_put_blocking(
                            &key,
                            header.positions,
                            &header.content_hash,
                        )?;
                        begun.watch(this.watch_upload_blocking(&key, header.positions)?);
                        begun
                    }
                    (None, None) => unreachable!("a piece with no header continues a slice"),
                };
                slice.push_blocking(&data)?;
                if complete {
                    // A finished slice is never replaced: checked under the lock that
                    // completions are recorded under, and put in place under it.
                    let (_, lease) = uploader.expect("an upload has a lease");
                    let announced = slice.announced();
                    let check = |watch: Option<Watch>| this.check_upload_blocking(&key, &announced, watch);
                    slice.finish_with_blocking(check, |rename| {
                        let state = this.lock();
                        match state.scheduler.finished(&key) {
                            None => rename(),
                            // A lost slice solved again takes the lost copy's place, with the
                            // hash it was recorded with only.
                            Some(recorded)
                                if recorded == announced && state.scheduler.under_repair(&key, lease) =>
                            {
                                rename()
                            }
                            Some(_) => Err(StoreError::Finished { key }),
                        }
                    })?;
                    return Ok(None);
                }
                Ok(Some(slice))
            })
            .await
            .map_err(ServiceError::from)?;
            match &put {
                Err(e @ (StoreError::HashMismatch { .. } | StoreError::Wire { .. })) => {
                    warn!(%key, error = %e, "corrupt upload refused");
                    Counters::add(&self.shared.counters.uploads_refused, 1);
                }
                Err(e @ StoreError::Finished { .. }) => {
                    warn!(%key, error = %e, "upload of a finished slice refused");
                    Counters::add(&self.shared.counters.not_allowed, 1);
                }
                Err(e @ StoreError::FailedCheck { .. }) => {
                    Counters::add(&self.shared.counters.uploads_failed_check, 1);
                    let (worker, _) = uploader.expect("an upload has a lease");
                    warn!(%key, %worker, error = %e, "an upload failed the check: its worker is refused from now on, its leases given to others");
                    self.refuse_worker(
                        worker,
                        "a slice it uploaded failed the coordinator's check of its values",
                    );
                }
                _ => {}
            }
            match put.map_err(ServiceError::from)? {
                Some(slice) => incoming = Some((key, wire_key, slice)),
                None => {
                    debug!(%key, "slice stored");
                    stored.push(wire_key);
                }
            }
        }
        framer.finish().map_err(ServiceError::from)?;
        if !stored.is_empty() {
            // One folder sync for every slice of the upload, before the worker hears they are
            // stored (and so before it completes the task and the journal records them).
            let this = self.clone();
            tokio::task::spawn_blocking(move || this.shared.store.sync_folder_blocking())
                .await
                .map_err(ServiceError::from)?
                .map_err(ServiceError::from)?;
        }
        Ok(Response::new(pb::UploadSliceResponse { stored, bytes }))
    }

    pub(super) async fn fetch(
        &self,
        request: Request<pb::FetchSliceRequest>,
    ) -> Result<Response<ChunkStream>, Status> {
        let keys = &request.get_ref().keys;
        if keys.len() > pb::MAX_FETCH_KEYS {
            return Err(Status::invalid_argument(format!(
                "a fetch names {} slices; at most {} a request",
                keys.len(),
                pb::MAX_FETCH_KEYS
            )));
        }
        let mut wanted = Vec::new();
        let mut seen = std::collections::HashSet::new();
        {
            let state = self.lock();
            for k in keys {
                let key = from_wire(k).map_err(ServiceError::from)?;
                if !seen.insert(key) {
                    continue; // named twice: served once
                }
                // A slice solved and not yet verified is served too: its verifier reads it.
                let hash = state
                    .scheduler
                    .finished(&key)
                    .or_else(|| state.scheduler.unverified(&key))
                    .ok_or(ServiceError::NotFinished { key })?;
                wanted.push((key, hash));
            }
        }
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<pb::SliceChunk, Status>>(8);
        let this = self.clone();
        tokio::spawn(async move {
            for (key, hash) in wanted {
                // Checked against its recorded hash (read once, in bounded memory), then sent
                // a chunk at a time from the file: no slice is held whole, however large.
                let store = this.clone();
                let got = tokio::task::spawn_blocking(move || {
                    store.read_stored_blocking(&key, &hash, || {
                        store.shared.store.open_checked_blocking(&key, &hash)
                    })
                })
                .await;
                let (file, positions, length) = match got {
                    Ok(Ok(opened)) => opened,
                    Ok(Err(e)) => {
                        if matches!(e, StoreError::Corrupt { .. }) {
                            Counters::add(&this.shared.counters.downloads_refused, 1);
                        }
                        let _ = tx.send(Err(ServiceError::from(e).status())).await;
                        return;
                    }
                    Err(e) => {
                        let _ = tx.send(Err(ServiceError::from(e).status())).await;
                        return;
                    }
                };
                let mut header = Some(pb::SliceHeader {
                    key: Some(to_wire(&key)),
                    total_length: length,
                    content_hash: hash.to_vec(),
                    positions,
                });
                let mut file = Some(file);
                let mut sent = 0u64;
                loop {
                    let mut f = file.take().expect("the file is given back after each read");
                    let want = (length - sent).min(CHUNK_BYTES as u64) as usize;
                    let read = tokio::task::spawn_blocking(move || {
                        use std::io::Read;
                        let mut data = vec![0u8; want];
                        f.read_exact(&mut data).map(|()| (f, data))
                    })
                    .await;
                    let data = match read {
                        Ok(Ok((f, data))) => {
                            file = Some(f);
                            data
                        }
                        Ok(Err(e)) => {
                            let e = StoreError::Corrupt {
                                key,
                                reason: format!("reading its file: {e}"),
                            };
                            let _ = tx.send(Err(ServiceError::from(e).status())).await;
                            return;
                        }
                        Err(e) => {
                            let _ = tx.send(Err(ServiceError::from(e).status())).await;
                            return;
                        }
                    };
                    sent += want as u64;
                    let chunk = pb::SliceChunk {
                        header: header.take(),
                        data,
                    };
                    // Counted when queued for the client (a chunk lost to a client that went
                    // away is counted too).
                    Counters::add(&this.shared.counters.bytes_fetched, chunk.data.len() as u64);
                    if tx.send(Ok(chunk)).await.is_err() {
                        return; // the client went away
                    }
                    if sent == length {
                        break;
                    }
                }
            }
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }
}

/// The coordinator's finished slices, as the check of uploads reads them: the hash the
/// scheduler recorded, the values from the store (a lost copy is repaired or queued to be
/// solved again, as on any read).
pub(super) struct StoreReader<'a>(pub(super) &'a CoordinatorService);

impl crate::check::Finished for StoreReader<'_> {
    fn recorded(&self, key: &SliceKey) -> Option<Hash> {
        self.0.lock().scheduler.finished(key)
    }

    fn read(&self, key: &SliceKey, hash: &Hash) -> Option<Vec<u16>> {
        let service = self.0;
        service
            .read_stored_blocking(key, hash, || {
                let mut values = Vec::new();
                let mut sink = |v: &[u16]| {
                    values.extend_from_slice(v);
                    Ok::<(), StoreError>(())
                };
                service
                    .shared
                    .store
                    .for_each_value_blocking(key, hash, &mut sink)?;
                Ok(values)
            })
            .ok()
    }
}
