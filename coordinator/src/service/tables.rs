//! The coordinator's tables: adopting a complete table on disk as finished slices, writing a
//! material's table from the stored slices (with the bytes of `zermelo solve`), and a stored
//! slice's repair: written again from its table when one holds it, else solved again by a
//! worker.

use super::*;

impl CoordinatorService {
    /// The materials of a job's plan that no job has planned yet and whose table is already
    /// complete and valid in the tables directory (see [`table_is_complete`]), each with its
    /// slices: read from the table (each checked against its content hash) and put into the
    /// store, so that workers can fetch them. Blocking.
    pub(super) fn adopt_tables_blocking(&self, materials: &[Material]) -> Vec<(Material, Vec<SliceResult>)> {
        let candidates: Vec<MaterialPlan> = {
            let state = self.lock();
            plan(materials)
                .materials
                .into_iter()
                .filter(|mp| !state.materials.contains_key(&mp.material))
                .collect()
        };
        let mut adopted = Vec::new();
        for mp in candidates {
            let path = self
                .shared
                .tables
                .join(zermelo_storage::table_file_name(&mp.material.to_string()));
            if !path.exists() {
                continue;
            }
            match self.adopt_table_blocking(&mp, &path) {
                Ok(Some(slices)) => {
                    info!(
                        material = %mp.material,
                        slices = slices.len(),
                        positions = mp.positions,
                        "table already complete and valid: its slices are taken as finished, not solved"
                    );
                    adopted.push((mp.material, slices));
                }
                Ok(None) => {
                    info!(material = %mp.material, "table present but not complete: it is built again")
                }
                Err(e) => {
                    warn!(material = %mp.material, error = %e, "table present but unreadable: it is built again")
                }
            }
        }
        adopted
    }

    /// One material of [`adopt_tables_blocking`](Self::adopt_tables_blocking): `None` if the file
    /// is not exactly the material's planned slices with good checksums. Blocking.
    pub(super) fn adopt_table_blocking(
        &self,
        mp: &MaterialPlan,
        path: &Path,
    ) -> Result<Option<Vec<SliceResult>>, ServiceError> {
        let material = mp.material;
        let table = Table::open(path).map_err(|source| ServiceError::Table { material, source })?;
        let mut expected: Vec<[u64; 2]> = mp.slices().map(|s| s.raw()).collect();
        expected.sort();
        let found: Vec<[u64; 2]> = table.slices().iter().map(|s| s.key).collect();
        if !written_by_this_build(&table, material) || found != expected || table.verify_checksum().is_err() {
            return Ok(None);
        }
        let mut slices = Vec::with_capacity(expected.len());
        for key in mp.slices() {
            let i = table
                .find_slice(key.raw())
                .expect("the table holds every planned slice");
            let (hash, positions) = (table.slices()[i].hash, table.slices()[i].count);
            self.store_from_table_blocking(key, &table, i)?;
            slices.push(SliceResult {
                key: *key,
                hash,
                positions,
            });
        }
        Ok(Some(slices))
    }

    /// Stores slice `key` from slice `i` of `table` (its material's), under the hash the table
    /// gives it. Read a block at a time (a slice may be larger than memory), re-encoded for the
    /// wire as it goes; the table checks each block's checksum and the slice's content hash at
    /// its end, and the store checks the values it receives against that hash. Blocking.
    pub(super) fn store_from_table_blocking(
        &self,
        key: &SliceKey,
        table: &Table,
        i: usize,
    ) -> Result<(), ServiceError> {
        let material = key.material;
        let entry = &table.slices()[i];
        self.shared
            .store
            .put_values_blocking(key, entry.count, &entry.hash, &mut |sink| {
                let mut failed = None;
                let streamed = table.stream_slice(i, |values| {
                    if failed.is_none() {
                        failed = sink(values).err();
                    }
                });
                if let Some(e) = failed {
                    return Err(ServiceError::from(e));
                }
                streamed.map_err(|source| ServiceError::Table { material, source })
            })?;
        Ok(())
    }

    /// Writes slice `key`'s stored copy again from its material's table, when the copy was
    /// found damaged: only if the table holds the slice with the hash recorded for it (checked
    /// again by the store as the values arrive), so a repaired copy is the very slice that was
    /// accepted. `false` when there is no such table. Blocking.
    pub(super) fn repair_from_table_blocking(
        &self,
        key: &SliceKey,
        recorded: &Hash,
    ) -> Result<bool, ServiceError> {
        let material = key.material;
        let path = self
            .shared
            .tables
            .join(zermelo_storage::table_file_name(&material.to_string()));
        if !path.exists() {
            return Ok(false);
        }
        let table = Table::open(&path).map_err(|source| ServiceError::Table { material, source })?;
        let Some(i) = table.find_slice(key.raw()) else {
            return Ok(false);
        };
        let entry = &table.slices()[i];
        if !written_by_this_build(&table, material) || &entry.hash != recorded {
            return Ok(false);
        }
        self.store_from_table_blocking(key, &table, i)?;
        Counters::add(&self.shared.counters.slices_repaired, 1);
        warn!(%key, table = %path.display(), "a damaged stored slice was written again from its table");
        Ok(true)
    }

    /// `read` of a stored slice; if it finds the stored copy damaged, the copy is repaired from
    /// its material's table ([`repair_from_table_blocking`](Self::repair_from_table_blocking))
    /// and read again. Blocking.
    pub(super) fn read_stored_blocking<T>(
        &self,
        key: &SliceKey,
        recorded: &Hash,
        read: impl Fn() -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        match read() {
            Err(e @ (StoreError::Corrupt { .. } | StoreError::Missing { .. })) => {
                match self.repair_from_table_blocking(key, recorded) {
                    Ok(true) => read(),
                    Ok(false) => {
                        self.slice_lost(key, &e);
                        Err(e)
                    }
                    Err(table) => {
                        warn!(%key, error = %table, "a damaged stored slice could not be repaired from its table");
                        self.slice_lost(key, &e);
                        Err(e)
                    }
                }
            }
            other => other,
        }
    }

    /// A finished slice's stored copy is lost (`why`) and no table holds it: a worker solves it
    /// again ([`Event::SliceLost`]), before any task; it must come back with its recorded hash.
    pub(super) fn slice_lost(&self, key: &SliceKey, why: &StoreError) {
        // Finishes no slice: nothing to journal, nothing to fail.
        let Ok(out) = self.drive(&mut self.lock(), Event::SliceLost { key: *key }) else {
            return;
        };
        if out
            .answers
            .iter()
            .any(|a| matches!(a, Action::RepairQueued { queued: true, .. }))
        {
            warn!(%key, error = %why, "a stored slice is lost and no table holds it: it is solved again");
        }
    }

    /// Writes a material's table from the stored slices (every one finished), with the bytes of
    /// `zermelo solve`; records the outcome. Blocking.
    pub(super) fn write_table_blocking(&self, material: Material) {
        // A slice found lost is solved again by a worker: if that happened while this write
        // failed, the table is written again at once.
        while self.write_table_once_blocking(material) {}
    }

    /// [`write_table_blocking`](Self::write_table_blocking), once: `true` when it should be
    /// written again (a lost slice it needed is back already).
    pub(super) fn write_table_once_blocking(&self, material: Material) -> bool {
        let (mp, hashes) = {
            let state = self.lock();
            let ms = &state.materials[&material];
            let hashes: Vec<_> = ms.plan.slices().map(|s| state.scheduler.finished(s)).collect();
            (ms.plan.clone(), hashes)
        };
        let result = (|| -> Result<u64, ServiceError> {
            let mut slices: Vec<(SliceKey, Hash)> = Vec::with_capacity(hashes.len());
            for (key, hash) in mp.slices().zip(&hashes) {
                slices.push((*key, hash.ok_or(ServiceError::NotFinished { key: *key })?));
            }
            slices.sort_by_key(|(k, _)| k.raw());
            let meta = TableMeta {
                material: material.to_string(),
                metric: Metric::Dtm,
                index_layout: INDEX_LAYOUT,
            };
            let path = self
                .shared
                .tables
                .join(zermelo_storage::table_file_name(&material.to_string()));
            let table_error = |source| ServiceError::Table { material, source };
            // Each slice is taken from the check's cache when it is there (decoded and hashed
            // when it was accepted), else streamed from the store a piece at a time: no slice
            // is read whole for the table, however large. Either way the writer's own hash of
            // what it was given must be the recorded one.
            let mut writer = TableWriter::create(
                &path,
                &meta,
                slices.len() as u64,
                mp.positions,
                &WriteOptions::default(),
            )
            .map_err(table_error)?;
            for (key, hash) in &slices {
                writer
                    .begin_slice(key.raw(), SliceIndexer::new(*key).size())
                    .map_err(table_error)?;
                let streamed = match self.shared.check.cached(key, hash) {
                    Some(values) => values
                        .chunks(1 << 16)
                        .try_for_each(|v| writer.push_values(v))
                        .map_err(table_error),
                    None => self
                        .shared
                        .store
                        .for_each_value_blocking(key, hash, &mut |values: &[u16]| {
                            writer.push_values(values).map_err(table_error)
                        }),
                };
                if let Err(ServiceError::Store(
                    e @ (StoreError::Corrupt { .. } | StoreError::Missing { .. }),
                )) = &streamed
                {
                    // The table is written again once the slice is solved again.
                    self.slice_lost(key, e);
                    return Err(ServiceError::SliceLost { key: *key });
                }
                streamed?;
                let written = writer.end_slice().map_err(table_error)?;
                if written != *hash {
                    return Err(ServiceError::TableHash {
                        key: *key,
                        found: hex(&written),
                        recorded: hex(hash),
                    });
                }
            }
            let summary = writer.finish().map_err(table_error)?;
            Ok(summary.bytes)
        })();
        let mut state = self.lock();
        let back = |key: &SliceKey| !state.scheduler.is_lost(key);
        let (table, again) = match result {
            Ok(bytes) => {
                info!(%material, positions = mp.positions, bytes, "table written");
                (TableState::Written, false)
            }
            Err(ServiceError::SliceLost { key }) if back(&key) => (TableState::Writing, true),
            Err(ServiceError::SliceLost { key }) => {
                warn!(%material, %key, "table not written until its lost slice is solved again");
                (TableState::AwaitingRepair, false)
            }
            Err(e) => {
                error!(%material, error = %e, "table not written");
                (TableState::Failed(e.to_string()), false)
            }
        };
        state
            .materials
            .get_mut(&material)
            .expect("a planned material")
            .table = table;
        again
    }

    /// Runs the tables to write on the blocking pool, one after the other.
    pub(super) async fn write_tables(&self, writes: Vec<Material>) -> Result<(), ServiceError> {
        for m in writes {
            let this = self.clone();
            tokio::task::spawn_blocking(move || this.write_table_blocking(m)).await?;
        }
        Ok(())
    }
}

/// Whether `table` is of `material` as this build writes tables: its index layout and the
/// current table format (an older format's slice hashes are not this build's: such a table is
/// built again, not taken over).
pub(super) fn written_by_this_build(table: &Table, material: Material) -> bool {
    table.meta().material == material.to_string()
        && table.meta().index_layout == INDEX_LAYOUT
        && table.format_version() == zermelo_storage::FORMAT_VERSION
}

/// Whether the material's table file holds exactly its finished slices, with their hashes; with
/// `whole`, its checksum is checked too (the whole file read).
pub(super) fn table_is_complete(
    tables: &Path,
    mp: &MaterialPlan,
    scheduler: &Scheduler,
    whole: bool,
) -> bool {
    let path = tables.join(zermelo_storage::table_file_name(&mp.material.to_string()));
    let Ok(table) = Table::open(&path) else {
        return false;
    };
    if !written_by_this_build(&table, mp.material) {
        return false;
    }
    let mut expected: Vec<([u64; 2], Option<schedule::Hash>)> =
        mp.slices().map(|s| (s.raw(), scheduler.finished(s))).collect();
    expected.sort();
    let found: Vec<([u64; 2], Option<schedule::Hash>)> =
        table.slices().iter().map(|s| (s.key, Some(s.hash))).collect();
    found == expected && (!whole || table.verify_checksum().is_ok())
}
