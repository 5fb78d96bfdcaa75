//! The scheduler: which slices are leased to which worker, and when. A pure state machine:
//! [`Scheduler::handle`] takes the time and one [`Event`] (a job submitted, a worker asking for
//! work, a heartbeat, a completion, a tick) and returns the [`Action`]s that follow (a lease to
//! hand out, a finished slice to journal, a lease that expired, a job that is done). It does no
//! I/O and reads no clock, so every sequence of events can be replayed in a test.
//!
//! * **Tasks.** A job's slices are grouped into tasks: slices of one wave of one material (so
//!   independent of each other), cut into groups of at least
//!   [`target_task_positions`](Config::target_task_positions) positions, or the whole wave when it
//!   is smaller. Tiny pawn-ending slices (8,192 positions with kings only) thus travel a hundred
//!   to a task rather than one to an RPC.
//! * **Leaf-first.** A task is leased only when every successor of every slice it leases is
//!   finished. Ready tasks are leased in plan order (materials and waves leaf-first, jobs in
//!   submission order).
//! * **Leases.** A lease lives [`lease_ttl`](Config::lease_ttl) from its grant or last heartbeat.
//!   Every event first expires the leases whose deadline has passed; an expired lease's task is
//!   leased again, to whoever asks next.
//! * **Completions.** The truth is per slice, not per lease: a reported slice is accepted when its
//!   successors are finished and its position count is right, whichever lease (live, expired, or
//!   from before a coordinator restart) it comes under, since a slice's values are a pure
//!   function of its successors. A slice that is already finished is accepted again only with
//!   the same content hash; a different hash rejects the whole completion (a worker computed a
//!   different table: a bug or a broken machine, never to be papered over). When a late
//!   completion finishes every slice of a task that is leased to someone else, that lease is
//!   revoked.
//! * **Lost slices.** A finished slice whose stored copy is lost ([`Event::SliceLost`]: damaged
//!   or gone, and no table holds it) stays finished, and is leased alone to be solved again
//!   before any task, once no slice it leads into is lost too. The repair is accepted only with
//!   the hash the slice was recorded with ([`Action::Repaired`]); an expired repair lease goes
//!   back in line.
//! * **Slices in parts.** With [`Config::parts`] above 1, a task of one large pawnless slice
//!   that can be cut ([`Config::splittable`]) is solved by a group of workers:
//!   the one that leases it holds part 0 (the leader; its lease names the group), and the next
//!   workers to ask get the other parts first, before any other task. The parts meet through the
//!   coordinator; the leader completes the slice, the others complete with nothing. A part lost
//!   (its lease expired, its worker gone, or too few workers left to fill the group) fails the
//!   whole group: every lease of it expires and the task is leased again.
//! * **Resuming.** [`Scheduler::resume`] starts from the slices a journal says are finished;
//!   jobs submitted again after it only lease what is left.
//!
//! The driver applies the actions in order. In particular it must make every
//! [`Action::SliceFinished`] durable (journal it) before it answers the worker with the
//! [`Action::Accepted`] that follows.
//!
//! ```
//! use zermelo_coordinator::plan::plan;
//! use zermelo_coordinator::schedule::{Action, Config, Event, JobId, Scheduler, SliceResult};
//!
//! let mut s = Scheduler::new(Config::default());
//! s.handle(0, Event::JobSubmitted { job: JobId(1), plan: plan(&["KQvK".parse().unwrap()]) });
//! let worker = match s.handle(0, Event::WorkerRegistered)[..] {
//!     [Action::Registered { worker, .. }] => worker,
//!     ref other => panic!("{other:?}"),
//! };
//! let Action::Lease(task) = s.handle(1, Event::LeaseRequested { worker }).remove(0) else { panic!() };
//! assert_eq!(task.slices[0].to_string(), "KQvK");
//! let slices = task
//!     .slices
//!     .iter()
//!     .map(|&key| SliceResult { key, hash: [7; 32], positions: task.positions })
//!     .collect();
//! let actions = s.handle(2, Event::TaskCompleted { lease: task.lease, slices });
//! assert!(matches!(actions[0], Action::SliceFinished(_)));
//! assert!(matches!(actions[1], Action::Accepted { new: 1, duplicates: 0, .. }));
//! assert_eq!(actions[2], Action::JobDone { job: JobId(1) });
//! ```

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;

use zermelo_chess::index::SliceIndexer;
use zermelo_chess::slice::SliceKey;

use crate::plan::Plan;

/// Milliseconds on the driver's monotonic clock.
pub type Millis = u64;

/// A slice's content hash (`zermelo_storage::slice_hash`).
pub type Hash = [u8; 32];

/// A hash (or any bytes) in lower-case hex, as the logs and the errors give it.
pub fn hex(hash: &[u8]) -> String {
    hash.iter().map(|b| format!("{b:02x}")).collect()
}

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub u64);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }
    };
}

id_type!(
    /// A job, numbered by whoever submits it (the coordinator, from its journal).
    JobId,
    "job-"
);
id_type!(
    /// A registered worker, numbered by the scheduler.
    WorkerId,
    "worker-"
);
id_type!(
    /// A lease of one task to one worker, numbered by the scheduler.
    LeaseId,
    "lease-"
);

/// The scheduler's knobs.
#[derive(Clone, Debug)]
pub struct Config {
    /// How long a lease lives after its grant or its last heartbeat.
    pub lease_ttl: Millis,
    /// The longest a lease lives, heartbeats or not: past it a heartbeat no longer renews it
    /// (the worker hears it is lost) and its task is leased again, so that a hung solve that
    /// still heartbeats cannot hold a task for good.
    pub max_lease_lifetime: Millis,
    /// A worker not heard from for this long is forgotten (its leases have expired by then);
    /// it must register again.
    pub worker_timeout: Millis,
    /// The fewest positions a task should hold: slices of one wave are grouped until they reach
    /// it (a wave with fewer is one task).
    pub target_task_positions: u64,
    /// The most leases one worker may hold at once: a client cannot hoard every ready task (a
    /// worker leases one task at a time).
    pub max_leases_per_worker: usize,
    /// The first worker and lease id. A restarted coordinator starts past every id its previous
    /// life gave out (from the wall clock, say), so that a worker of that life hears that its
    /// ids are unknown rather than mistaking them for new ones.
    pub first_id: u64,
    /// Every slice a worker solves is verified whole by another worker before it is finished
    /// (`zermelo coordinator --verify all`): a completion leaves its task waiting for a
    /// verification lease ([`Event::Verified`]).
    pub verify_all: bool,
    /// The most parts a slice is cut into, each solved by a worker of a group (see the module
    /// docs); 1: every slice goes whole to one worker.
    pub parts: u32,
    /// With [`Config::parts`] above 1: the fewest positions of a slice solved in parts.
    pub split_over: u64,
    /// Whether a slice can be solved in parts (`zermelo_worker::solver::splittable`, which
    /// this crate does not link).
    pub splittable: fn(&SliceKey) -> bool,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            lease_ttl: 30_000,
            max_lease_lifetime: 24 * 3_600_000,
            worker_timeout: 90_000,
            max_leases_per_worker: 4,
            target_task_positions: 1 << 20,
            first_id: 1,
            verify_all: false,
            parts: 1,
            split_over: 1 << 30,
            splittable: |_| false,
        }
    }
}

/// One solved slice as a worker reports it (and as the journal records it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SliceResult {
    pub key: SliceKey,
    pub hash: Hash,
    /// Positions (values) in the slice.
    pub positions: u64,
}

/// What happened.
#[derive(Clone, Debug)]
pub enum Event {
    /// A job to build: the plan of its materials (see [`crate::plan::plan`]).
    JobSubmitted { job: JobId, plan: Plan },
    /// A worker introduced itself (its protocol version already checked).
    WorkerRegistered,
    /// A worker asks for a task.
    LeaseRequested { worker: WorkerId },
    /// A worker says it is alive and working on these leases.
    Heartbeat { worker: WorkerId, leases: Vec<LeaseId> },
    /// A worker reports solved slices under a lease (uploaded and hash-checked already).
    TaskCompleted {
        lease: LeaseId,
        slices: Vec<SliceResult>,
    },
    /// Time passed: expire leases, forget silent workers.
    Tick,
    /// A worker is gone (it said so, or its connection broke): its leases expire now.
    WorkerLost { worker: WorkerId },
    /// The stored copy of a finished slice is lost (damaged or gone, and no table holds it): it
    /// is solved again, before any task, by a repair lease, and must come back with the hash
    /// it was recorded with. It stays finished meanwhile.
    SliceLost { key: SliceKey },
    /// The worker holding verification lease `lease` re-derived its slices: they all agreed
    /// (they are finished), or the coordinator confirmed one wrong (the task is solved again).
    Verified { lease: LeaseId, agreed: bool },
}

/// A task handed to a worker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeasedTask {
    pub lease: LeaseId,
    pub worker: WorkerId,
    /// The job whose plan created the task (a slice shared by two jobs is solved once).
    pub job: JobId,
    /// The slices to solve: independent, every successor finished.
    pub slices: Vec<SliceKey>,
    /// Every successor of `slices`, sorted and without duplicates: all finished, each with the
    /// hash it was accepted with (a worker uses a copy of it only when the hash matches).
    pub successors: Vec<(SliceKey, Hash)>,
    /// Positions over `slices`.
    pub positions: u64,
    /// When the lease expires unless a heartbeat renews it.
    pub deadline: Millis,
    /// Empty for a task to solve; for a verification, the hash each of `slices` was uploaded
    /// with by the worker that solved it.
    pub verify: Vec<Hash>,
    /// For one part of a slice solved by a group of workers: which.
    pub part: Option<PartOf>,
}

/// One part of a slice solved by a group of workers ([`Config::parts`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartOf {
    /// The group: the lease of its part 0, the leader.
    pub group: LeaseId,
    pub parts: u32,
    pub index: u32,
}

/// A live verification lease ([`Scheduler::verification`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerificationLease {
    pub verifier: WorkerId,
    /// The worker that solved the task.
    pub solver: WorkerId,
    /// The task's slices, each with the hash it was uploaded with.
    pub slices: Vec<(SliceKey, Hash)>,
}

/// Why a worker gets no task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoTask {
    /// Every job is done, or none was submitted.
    Idle,
    /// Work remains, but it waits on slices leased to others.
    Waiting,
    /// The worker id is unknown (forgotten, or from a previous coordinator): register again.
    UnknownWorker,
}

/// Why a completion is rejected. Nothing of a rejected completion is recorded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Rejection {
    /// The worker computed a different table for a slice than the one recorded: a bug or a
    /// broken machine. Log it loudly.
    #[error(
        "slice {key} is finished with hash {} but was reported with hash {}",
        hex(recorded),
        hex(reported)
    )]
    HashMismatch {
        key: SliceKey,
        recorded: Hash,
        reported: Hash,
    },
    #[error("slice {key} has {expected} positions but was reported with {reported}")]
    PositionsMismatch {
        key: SliceKey,
        expected: u64,
        reported: u64,
    },
    #[error("slice {key} is not part of any job")]
    UnknownSlice { key: SliceKey },
    #[error("slice {key} was reported before its successor {successor} was finished")]
    SuccessorNotFinished { key: SliceKey, successor: SliceKey },
    #[error("slice {key} is reported twice with different hashes")]
    ConflictingReport { key: SliceKey },
    #[error("slice {key} is solved and waits for its verification")]
    AwaitingVerification { key: SliceKey },
    #[error("slice {key} is not one of the lease's task, or one of them is missing")]
    NotTheTask { key: SliceKey },
    #[error("{lease} is not a live verification lease")]
    NotAVerification { lease: LeaseId },
}

/// Why a job is not taken.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum JobRejection {
    #[error("{job} was submitted already")]
    DuplicateJob { job: JobId },
    #[error("the plan has slice {key} but not its successor {successor}")]
    MissingSuccessor { key: SliceKey, successor: SliceKey },
    #[error("slice {key} was finished with {recorded} positions but its index has {expected}")]
    FinishedCountMismatch {
        key: SliceKey,
        recorded: u64,
        expected: u64,
    },
}

/// What to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// The job is planned: `slices` and `positions` in all, `finished` of the slices already.
    JobAccepted {
        job: JobId,
        slices: u64,
        positions: u64,
        finished: u64,
    },
    JobRejected {
        job: JobId,
        reason: JobRejection,
    },
    /// Answer to [`Event::WorkerRegistered`].
    Registered {
        worker: WorkerId,
        lease_ttl: Millis,
    },
    /// Answer to [`Event::LeaseRequested`]: a task.
    Lease(LeasedTask),
    /// Answer to [`Event::LeaseRequested`]: nothing now.
    NoTask(NoTask),
    /// Answer to [`Event::Heartbeat`]: the leases renewed and those the worker must drop.
    LeaseStatus {
        valid: Vec<LeaseId>,
        lost: Vec<LeaseId>,
        unknown_worker: bool,
    },
    /// A slice finished for the first time: journal it (durably, before the `Accepted` that
    /// follows is answered).
    SliceFinished(SliceResult),
    /// Answer to [`Event::TaskCompleted`]: `new` slices recorded, `duplicates` already finished
    /// with the same hash.
    Accepted {
        lease: LeaseId,
        new: usize,
        duplicates: usize,
    },
    /// Answer to [`Event::TaskCompleted`]: nothing recorded.
    Rejected {
        lease: LeaseId,
        reason: Rejection,
    },
    /// A lease ran out (or its worker was lost); its task will be leased again.
    Expired {
        lease: LeaseId,
        worker: WorkerId,
    },
    /// A lease whose slices were all finished by someone else (a late completion of an earlier
    /// lease): its worker should drop it (heartbeats now report it lost).
    Revoked {
        lease: LeaseId,
        worker: WorkerId,
    },
    /// A worker not heard from for [`Config::worker_timeout`] was dropped.
    WorkerForgotten {
        worker: WorkerId,
    },
    /// Every slice of the job is finished.
    JobDone {
        job: JobId,
    },
    /// Answer to [`Event::SliceLost`]: the slice waits for a repair lease (`false`: it was
    /// waiting or leased for one already, or is not a finished slice).
    RepairQueued {
        key: SliceKey,
        queued: bool,
    },
    /// A repair lease completed with the slice's recorded hash: its stored copy is whole again.
    Repaired {
        key: SliceKey,
    },
}

/// How far a job is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobProgress {
    pub slices_done: u64,
    pub slices_total: u64,
    pub positions_done: u64,
    pub positions_total: u64,
}

impl JobProgress {
    pub fn is_done(&self) -> bool {
        self.slices_done == self.slices_total
    }
}

type SliceIx = u32;
type TaskIx = u32;

#[derive(Debug)]
struct Slice {
    key: SliceKey,
    positions: u64,
    finished: Option<Hash>,
    /// `None` for a slice known only as finished (from the journal) and in no job's plan yet.
    task: Option<TaskIx>,
    successors: Vec<SliceIx>,
    /// Unfinished slices waiting on this one.
    dependents: Vec<SliceIx>,
    unfinished_successors: u32,
    /// Indices into `Scheduler::jobs`.
    jobs: Vec<u32>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TaskState {
    Blocked,
    Ready,
    Leased(LeaseId),
    /// Solved and uploaded, waiting for its verification ([`Config::verify_all`]).
    Verifying,
    Done,
}

#[derive(Debug)]
struct Task {
    job: JobId,
    slices: Vec<SliceIx>,
    /// Unfinished slices.
    unfinished: u32,
    /// Unfinished slices with an unfinished successor.
    waiting: u32,
    state: TaskState,
}

#[derive(Debug)]
struct Lease {
    task: TaskIx,
    worker: WorkerId,
    deadline: Millis,
    /// When it was granted.
    granted: Millis,
}

/// A slice solved by a group of workers, one part each: the task is leased to part 0, whose
/// lease names the group; the other parts hold helper leases.
#[derive(Debug)]
struct Group {
    /// Parts 1.. in order.
    helpers: Vec<Slot>,
}

/// A helper part of a [`Group`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    /// No worker has it yet.
    Open,
    Leased(LeaseId),
    /// Its worker completed it (it gave the leader its values).
    Done,
}

/// The lease of a part other than 0 of a [`Group`].
#[derive(Debug)]
struct Helper {
    group: LeaseId,
    index: u32,
    worker: WorkerId,
    deadline: Millis,
    granted: Millis,
}

#[derive(Debug)]
struct Worker {
    last_seen: Millis,
}

#[derive(Debug)]
struct Job {
    id: JobId,
    slices_total: u64,
    positions_total: u64,
    slices_done: u64,
    positions_done: u64,
}

/// The scheduler's whole state. See the [module docs](self).
#[derive(Debug)]
pub struct Scheduler {
    config: Config,
    now: Millis,
    slices: Vec<Slice>,
    index: HashMap<SliceKey, SliceIx>,
    tasks: Vec<Task>,
    /// Ready tasks; the smallest index (earliest in plan order) is leased first.
    ready: BTreeSet<TaskIx>,
    leases: BTreeMap<LeaseId, Lease>,
    /// Finished slices whose stored copy is lost, waiting for a repair lease ([`Event::SliceLost`]).
    lost: BTreeSet<SliceIx>,
    /// Repair leases: one slice each, solved again.
    repairs: BTreeMap<LeaseId, Repair>,
    /// Tasks solved and waiting for (or under) a verification, by task ([`Config::verify_all`]).
    unverified: BTreeMap<TaskIx, Unverified>,
    /// Verification leases.
    verifications: BTreeMap<LeaseId, Verification>,
    /// Slices solved in parts, by their leader's lease ([`Config::parts`]).
    groups: BTreeMap<LeaseId, Group>,
    /// The leases of the parts other than 0.
    helpers: BTreeMap<LeaseId, Helper>,
    workers: BTreeMap<WorkerId, Worker>,
    jobs: Vec<Job>,
    next_id: u64,
}

/// A lease to solve a lost slice again.
#[derive(Debug)]
struct Repair {
    slice: SliceIx,
    worker: WorkerId,
    deadline: Millis,
    granted: Millis,
}

/// A task solved, its slices uploaded, that waits for a worker other than its solver to verify
/// them.
#[derive(Debug)]
struct Unverified {
    /// Its slices, each with the hash it was uploaded with.
    slices: Vec<(SliceIx, Hash)>,
    solver: WorkerId,
    /// The verification lease it is under, if any.
    lease: Option<LeaseId>,
}

/// A lease to verify the slices of a solved task.
#[derive(Debug)]
struct Verification {
    task: TaskIx,
    worker: WorkerId,
    deadline: Millis,
    granted: Millis,
}

/// Conflicting records of one slice in the finished slices a scheduler resumes from.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("slice {key} is recorded as finished twice, with different hashes or counts")]
pub struct ResumeConflict {
    pub key: SliceKey,
}

impl Scheduler {
    /// A scheduler with no job and nothing finished.
    pub fn new(config: Config) -> Scheduler {
        let next_id = config.first_id.max(1);
        Scheduler {
            config,
            now: 0,
            slices: Vec::new(),
            index: HashMap::new(),
            tasks: Vec::new(),
            ready: BTreeSet::new(),
            leases: BTreeMap::new(),
            lost: BTreeSet::new(),
            repairs: BTreeMap::new(),
            unverified: BTreeMap::new(),
            verifications: BTreeMap::new(),
            groups: BTreeMap::new(),
            helpers: BTreeMap::new(),
            workers: BTreeMap::new(),
            jobs: Vec::new(),
            next_id,
        }
    }

    /// A scheduler that knows these slices are finished (from the journal). Submit the journal's
    /// jobs again after it: only their unfinished slices are leased.
    pub fn resume(
        config: Config,
        finished: impl IntoIterator<Item = SliceResult>,
    ) -> Result<Scheduler, ResumeConflict> {
        let mut s = Scheduler::new(config);
        s.adopt(finished)?;
        Ok(s)
    }

    /// Records slices finished elsewhere (the journal's, or those of a complete table found on
    /// disk) before a job that plans them is submitted. A slice the scheduler already knows must
    /// be finished with the same hash and count; one that is planned and unfinished, or finished
    /// differently, is a conflict (the slices before it are recorded).
    pub fn adopt(&mut self, finished: impl IntoIterator<Item = SliceResult>) -> Result<(), ResumeConflict> {
        for r in finished {
            match self.index.get(&r.key) {
                Some(&ix) => {
                    let slice = &self.slices[ix as usize];
                    if slice.finished != Some(r.hash) || slice.positions != r.positions {
                        return Err(ResumeConflict { key: r.key });
                    }
                }
                None => {
                    self.push_slice(r.key, r.positions, Some(r.hash));
                }
            }
        }
        Ok(())
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Takes one event at time `now` (a monotonic clock; a time before the last one counts as the
    /// last one) and returns what to do, in order.
    pub fn handle(&mut self, now: Millis, event: Event) -> Vec<Action> {
        self.now = self.now.max(now);
        let mut out = Vec::new();
        self.expire_leases(&mut out);
        match event {
            Event::JobSubmitted { job, plan } => self.submit(job, &plan, &mut out),
            Event::WorkerRegistered => {
                let worker = WorkerId(self.fresh_id());
                self.workers.insert(worker, Worker { last_seen: self.now });
                out.push(Action::Registered {
                    worker,
                    lease_ttl: self.config.lease_ttl,
                });
            }
            Event::LeaseRequested { worker } => self.lease(worker, &mut out),
            Event::Heartbeat { worker, leases } => self.heartbeat(worker, leases, &mut out),
            Event::TaskCompleted { lease, slices } => self.complete(lease, &slices, &mut out),
            Event::Tick => self.forget_silent_workers(&mut out),
            Event::WorkerLost { worker } => {
                for lease in self.leases_of(worker) {
                    if self.is_live(lease) {
                        self.expire(lease, &mut out);
                    }
                }
                self.workers.remove(&worker);
                self.end_unfillable_groups(&mut out);
            }
            Event::SliceLost { key } => {
                let queued = match self.index.get(&key) {
                    Some(&ix) if self.slices[ix as usize].finished.is_some() && !self.is_lost(&key) => {
                        self.lost.insert(ix)
                    }
                    _ => false,
                };
                out.push(Action::RepairQueued { key, queued });
            }
            Event::Verified { lease, agreed } => self.verified(lease, agreed, &mut out),
        }
        out
    }

    /// The live leases (tasks and repairs) of a worker.
    fn leases_of(&self, worker: WorkerId) -> Vec<LeaseId> {
        let tasks = self
            .leases
            .iter()
            .filter(|(_, l)| l.worker == worker)
            .map(|(&id, _)| id);
        let repairs = self
            .repairs
            .iter()
            .filter(|(_, r)| r.worker == worker)
            .map(|(&id, _)| id);
        let verifications = self
            .verifications
            .iter()
            .filter(|(_, v)| v.worker == worker)
            .map(|(&id, _)| id);
        let helpers = self
            .helpers
            .iter()
            .filter(|(_, h)| h.worker == worker)
            .map(|(&id, _)| id);
        tasks.chain(repairs).chain(verifications).chain(helpers).collect()
    }

    /// The progress of a job, `None` if it was never submitted.
    pub fn job(&self, job: JobId) -> Option<JobProgress> {
        self.jobs.iter().find(|j| j.id == job).map(progress)
    }

    /// Every job with its progress, in submission order.
    pub fn jobs(&self) -> impl Iterator<Item = (JobId, JobProgress)> + '_ {
        self.jobs.iter().map(|j| (j.id, progress(j)))
    }

    /// Workers registered and not forgotten.
    pub fn workers_alive(&self) -> usize {
        self.workers.len()
    }

    /// Leases not expired, revoked or completed (repair leases and parts included).
    pub fn live_leases(&self) -> usize {
        self.leases.len() + self.repairs.len() + self.verifications.len() + self.helpers.len()
    }

    /// Of a live lease of one part of a slice solved in parts: the part, and its worker.
    pub fn part_of(&self, lease: LeaseId) -> Option<(PartOf, WorkerId)> {
        if let Some(h) = self.helpers.get(&lease) {
            let parts = self.groups[&h.group].helpers.len() as u32 + 1;
            let part = PartOf {
                group: h.group,
                parts,
                index: h.index,
            };
            return Some((part, h.worker));
        }
        let g = self.groups.get(&lease)?;
        let part = PartOf {
            group: lease,
            parts: g.helpers.len() as u32 + 1,
            index: 0,
        };
        Some((part, self.leases[&lease].worker))
    }

    /// Whether group `group` (a leader's lease) is alive: none of its parts lost.
    pub fn group_alive(&self, group: LeaseId) -> bool {
        self.groups.contains_key(&group)
    }

    /// Of a live verification lease: its worker, the worker that solved the task, and the
    /// task's slices with the hashes they were uploaded with.
    pub fn verification(&self, lease: LeaseId) -> Option<VerificationLease> {
        let v = self.verifications.get(&lease)?;
        let u = &self.unverified[&v.task];
        let slices = u
            .slices
            .iter()
            .map(|&(ix, hash)| (self.slices[ix as usize].key, hash))
            .collect();
        Some(VerificationLease {
            verifier: v.worker,
            solver: u.solver,
            slices,
        })
    }

    /// The hash a solved slice waiting for its verification was uploaded with.
    pub fn unverified(&self, key: &SliceKey) -> Option<Hash> {
        let &ix = self.index.get(key)?;
        let t = self.slices[ix as usize].task?;
        let u = self.unverified.get(&t)?;
        u.slices.iter().find(|(i, _)| *i == ix).map(|&(_, h)| h)
    }

    /// Finished slices whose stored copy is lost, waiting for or under a repair lease.
    #[cfg(test)]
    fn slices_lost(&self) -> usize {
        self.lost.len() + self.repairs.len()
    }

    /// Whether finished slice `key` is lost: waiting for a repair lease, or under one.
    pub fn is_lost(&self, key: &SliceKey) -> bool {
        self.index
            .get(key)
            .is_some_and(|ix| self.lost.contains(ix) || self.repairs.values().any(|r| r.slice == *ix))
    }

    /// Whether slice `key` is under a live repair lease: an upload of it under that lease may
    /// replace its lost copy, with the recorded hash only.
    pub fn under_repair(&self, key: &SliceKey, lease: LeaseId) -> bool {
        self.repairs
            .get(&lease)
            .is_some_and(|r| self.slices[r.slice as usize].key == *key)
    }

    /// The worker holding a live lease, and the slices of its task (of a repair lease: its one
    /// slice).
    pub fn lease_holder(&self, lease: LeaseId) -> Option<(WorkerId, Vec<SliceKey>)> {
        if let Some(r) = self.repairs.get(&lease) {
            return Some((r.worker, vec![self.slices[r.slice as usize].key]));
        }
        let l = self.leases.get(&lease)?;
        let task = &self.tasks[l.task as usize];
        let slices = task
            .slices
            .iter()
            .map(|&ix| self.slices[ix as usize].key)
            .collect();
        Some((l.worker, slices))
    }

    /// The recorded hash of a finished slice.
    pub fn finished(&self, key: &SliceKey) -> Option<Hash> {
        self.index
            .get(key)
            .and_then(|&ix| self.slices[ix as usize].finished)
    }

    fn fresh_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    fn push_slice(&mut self, key: SliceKey, positions: u64, finished: Option<Hash>) -> SliceIx {
        let ix = SliceIx::try_from(self.slices.len()).expect("fewer than 2^32 slices");
        self.slices.push(Slice {
            key,
            positions,
            finished,
            task: None,
            successors: Vec::new(),
            dependents: Vec::new(),
            unfinished_successors: 0,
            jobs: Vec::new(),
        });
        self.index.insert(key, ix);
        ix
    }

    fn submit(&mut self, job: JobId, plan: &Plan, out: &mut Vec<Action>) {
        if self.jobs.iter().any(|j| j.id == job) {
            out.push(Action::JobRejected {
                job,
                reason: JobRejection::DuplicateJob { job },
            });
            return;
        }
        // Check the whole plan before changing anything.
        let planned: HashMap<SliceKey, u64> = plan
            .materials
            .iter()
            .flat_map(|m| m.slices())
            .map(|&s| (s, SliceIndexer::new(s).size()))
            .collect();
        let mut successors: HashMap<SliceKey, Vec<SliceKey>> = HashMap::new();
        for &key in plan.materials.iter().flat_map(|m| m.slices()) {
            let expected = planned[&key];
            if let Some(&ix) = self.index.get(&key) {
                let slice = &self.slices[ix as usize];
                if slice.finished.is_some() && slice.positions != expected {
                    let reason = JobRejection::FinishedCountMismatch {
                        key,
                        recorded: slice.positions,
                        expected,
                    };
                    out.push(Action::JobRejected { job, reason });
                    return;
                }
                if slice.task.is_some() || slice.finished.is_some() {
                    continue; // planned by an earlier job, or finished
                }
            }
            let succ = key.successors();
            if let Some(&successor) = succ
                .iter()
                .find(|t| !planned.contains_key(t) && !self.index.contains_key(t))
            {
                out.push(Action::JobRejected {
                    job,
                    reason: JobRejection::MissingSuccessor { key, successor },
                });
                return;
            }
            successors.insert(key, succ);
        }

        let job_ix = u32::try_from(self.jobs.len()).expect("fewer than 2^32 jobs");
        let mut record = Job {
            id: job,
            slices_total: 0,
            positions_total: 0,
            slices_done: 0,
            positions_done: 0,
        };
        // Register every new slice first, so that successors have indices below.
        for m in &plan.materials {
            for &key in m.slices() {
                if !self.index.contains_key(&key) {
                    self.push_slice(key, planned[&key], None);
                }
                let slice = &mut self.slices[self.index[&key] as usize];
                if slice.jobs.last() == Some(&job_ix) {
                    continue; // listed twice
                }
                slice.jobs.push(job_ix);
                record.slices_total += 1;
                record.positions_total += slice.positions;
                if slice.finished.is_some() {
                    record.slices_done += 1;
                    record.positions_done += slice.positions;
                }
            }
        }
        // Link the new slices to their successors, then cut each wave into tasks, leaf-first.
        let target = self.config.target_task_positions;
        for m in &plan.materials {
            for wave in &m.waves {
                let mut group: Vec<SliceIx> = Vec::new();
                let mut groups: Vec<Vec<SliceIx>> = Vec::new();
                let mut group_positions = 0;
                for key in wave {
                    let Some(succ) = successors.remove(key) else {
                        continue;
                    };
                    let ix = self.index[key];
                    self.link(ix, &succ);
                    group.push(ix);
                    group_positions += self.slices[ix as usize].positions;
                    if group_positions >= target {
                        groups.push(std::mem::take(&mut group));
                        group_positions = 0;
                    }
                }
                if !group.is_empty() {
                    // A small remainder joins the group before it rather than make a tiny task.
                    match groups.last_mut() {
                        Some(last) if group_positions < target / 2 => last.append(&mut group),
                        _ => groups.push(group),
                    }
                }
                for slices in groups {
                    self.push_task(job, slices);
                }
            }
        }
        let done = record.slices_done == record.slices_total;
        out.push(Action::JobAccepted {
            job,
            slices: record.slices_total,
            positions: record.positions_total,
            finished: record.slices_done,
        });
        self.jobs.push(record);
        if done {
            out.push(Action::JobDone { job });
        }
    }

    /// Links a new, unfinished slice to its successors (all registered by now).
    fn link(&mut self, ix: SliceIx, successors: &[SliceKey]) {
        let mut unfinished = 0;
        let mut succ_ix = Vec::with_capacity(successors.len());
        for t in successors {
            let t_ix = self.index[t];
            succ_ix.push(t_ix);
            let t_slice = &mut self.slices[t_ix as usize];
            if t_slice.finished.is_none() {
                t_slice.dependents.push(ix);
                unfinished += 1;
            }
        }
        let slice = &mut self.slices[ix as usize];
        slice.successors = succ_ix;
        slice.unfinished_successors = unfinished;
    }

    fn push_task(&mut self, job: JobId, slices: Vec<SliceIx>) {
        let t = TaskIx::try_from(self.tasks.len()).expect("fewer than 2^32 tasks");
        let mut waiting = 0;
        for &ix in &slices {
            let slice = &mut self.slices[ix as usize];
            slice.task = Some(t);
            if slice.unfinished_successors > 0 {
                waiting += 1;
            }
        }
        let unfinished = slices.len() as u32;
        let state = if waiting == 0 {
            TaskState::Ready
        } else {
            TaskState::Blocked
        };
        if state == TaskState::Ready {
            self.ready.insert(t);
        }
        self.tasks.push(Task {
            job,
            slices,
            unfinished,
            waiting,
            state,
        });
    }

    fn lease(&mut self, worker: WorkerId, out: &mut Vec<Action>) {
        let Some(w) = self.workers.get_mut(&worker) else {
            out.push(Action::NoTask(NoTask::UnknownWorker));
            return;
        };
        w.last_seen = self.now;
        let held = self.leases_of(worker).len();
        if held >= self.config.max_leases_per_worker {
            out.push(Action::NoTask(NoTask::Waiting));
            return;
        }
        if self.lease_repair(worker, out)
            || self.lease_verification(worker, out)
            || self.lease_helper(worker, out)
        {
            return;
        }
        let Some(t) = self.ready.pop_first() else {
            let idle = self.jobs.iter().all(|j| j.slices_done == j.slices_total)
                && self.lost.is_empty()
                && self.repairs.is_empty()
                && self.unverified.is_empty();
            out.push(Action::NoTask(if idle { NoTask::Idle } else { NoTask::Waiting }));
            return;
        };
        let lease = LeaseId(self.fresh_id());
        let task = &mut self.tasks[t as usize];
        debug_assert_eq!(task.state, TaskState::Ready);
        debug_assert_eq!(task.waiting, 0);
        task.state = TaskState::Leased(lease);
        let job = task.job;
        let slices = self.unfinished(t);
        let successors = self.successors_with_hashes(slices.iter().copied());
        let deadline = self.now + self.config.lease_ttl;
        let parts = self.parts_for(&slices);
        let part = (parts > 1).then(|| {
            self.groups.insert(
                lease,
                Group {
                    helpers: vec![Slot::Open; parts as usize - 1],
                },
            );
            PartOf {
                group: lease,
                parts,
                index: 0,
            }
        });
        out.push(Action::Lease(LeasedTask {
            lease,
            worker,
            job,
            slices: slices.iter().map(|&ix| self.slices[ix as usize].key).collect(),
            successors,
            positions: slices.iter().map(|&ix| self.slices[ix as usize].positions).sum(),
            deadline,
            verify: Vec::new(),
            part,
        }));
        self.leases.insert(
            lease,
            Lease {
                task: t,
                worker,
                deadline,
                granted: self.now,
            },
        );
    }

    /// The unfinished slices of task `t`.
    fn unfinished(&self, t: TaskIx) -> Vec<SliceIx> {
        self.tasks[t as usize]
            .slices
            .iter()
            .copied()
            .filter(|&ix| self.slices[ix as usize].finished.is_none())
            .collect()
    }

    /// How many parts a task of these (unfinished) slices is solved in: 1 unless it is one
    /// slice that can be cut, of at least [`Config::split_over`] positions, and more than one
    /// worker is alive ([`Config::parts`] at most).
    fn parts_for(&self, slices: &[SliceIx]) -> u32 {
        let parts = self.config.parts.min(self.workers.len() as u32);
        match slices {
            [ix] if parts > 1 => {
                let slice = &self.slices[*ix as usize];
                let split = slice.positions >= self.config.split_over && (self.config.splittable)(&slice.key);
                if split {
                    parts
                } else {
                    1
                }
            }
            _ => 1,
        }
    }

    /// Leases an open part of a group, before any task (its other parts wait for it), to a
    /// worker that holds no part of that group: `false` if there is none.
    fn lease_helper(&mut self, worker: WorkerId, out: &mut Vec<Action>) -> bool {
        let Some((group, slot)) = self.groups.iter().find_map(|(&group, g)| {
            let mine = self.leases[&group].worker == worker
                || self
                    .helpers
                    .values()
                    .any(|h| h.group == group && h.worker == worker);
            let open = g.helpers.iter().position(|&s| s == Slot::Open)?;
            (!mine).then_some((group, open))
        }) else {
            return false;
        };
        let lease = LeaseId(self.fresh_id());
        let g = self.groups.get_mut(&group).expect("found above");
        g.helpers[slot] = Slot::Leased(lease);
        let parts = g.helpers.len() as u32 + 1;
        let index = slot as u32 + 1;
        let t = self.leases[&group].task;
        let job = self.tasks[t as usize].job;
        let slices = self.unfinished(t);
        let successors = self.successors_with_hashes(slices.iter().copied());
        let deadline = self.now + self.config.lease_ttl;
        out.push(Action::Lease(LeasedTask {
            lease,
            worker,
            job,
            slices: slices.iter().map(|&ix| self.slices[ix as usize].key).collect(),
            successors,
            positions: slices.iter().map(|&ix| self.slices[ix as usize].positions).sum(),
            deadline,
            verify: Vec::new(),
            part: Some(PartOf { group, parts, index }),
        }));
        self.helpers.insert(
            lease,
            Helper {
                group,
                index,
                worker,
                deadline,
                granted: self.now,
            },
        );
        true
    }

    /// Ends group `group` (its leader's lease ended, or one of its parts was lost): the helper
    /// parts still leased expire with it; with `leader`, its lease too (the task is leased
    /// again).
    fn end_group(&mut self, group: LeaseId, leader: bool, out: &mut Vec<Action>) {
        let Some(g) = self.groups.remove(&group) else {
            return;
        };
        for slot in g.helpers {
            if let Slot::Leased(lease) = slot {
                let h = self.helpers.remove(&lease).expect("a leased part's lease");
                out.push(Action::Expired {
                    lease,
                    worker: h.worker,
                });
            }
        }
        if leader && self.leases.contains_key(&group) {
            self.expire(group, out);
        }
    }

    /// Groups with an open part and fewer workers alive than parts end (their parts would
    /// wait for ever): the task is leased again, in fewer parts.
    fn end_unfillable_groups(&mut self, out: &mut Vec<Action>) {
        let alive = self.workers.len();
        let unfillable: Vec<LeaseId> = self
            .groups
            .iter()
            .filter(|(_, g)| g.helpers.contains(&Slot::Open) && alive < g.helpers.len() + 1)
            .map(|(&group, _)| group)
            .collect();
        for group in unfillable {
            self.end_group(group, true, out);
        }
    }

    /// Leases a lost slice to solve again, before any task, when one waits whose successors are
    /// whole (none lost itself): `false` if none does.
    fn lease_repair(&mut self, worker: WorkerId, out: &mut Vec<Action>) -> bool {
        let repairing: BTreeSet<SliceIx> = self.repairs.values().map(|r| r.slice).collect();
        let Some(ix) = self.lost.iter().copied().find(|&ix| {
            self.successors_of(ix)
                .iter()
                .all(|s| !self.lost.contains(s) && !repairing.contains(s))
        }) else {
            return false;
        };
        self.lost.remove(&ix);
        let lease = LeaseId(self.fresh_id());
        let successors: BTreeSet<(SliceKey, Hash)> = self
            .successors_of(ix)
            .iter()
            .map(|&s| {
                let t = &self.slices[s as usize];
                (
                    t.key,
                    t.finished.expect("a finished slice's successors are finished"),
                )
            })
            .collect();
        let slice = &self.slices[ix as usize];
        let job = slice.task.map_or(JobId(0), |t| self.tasks[t as usize].job);
        let deadline = self.now + self.config.lease_ttl;
        out.push(Action::Lease(LeasedTask {
            lease,
            worker,
            job,
            slices: vec![slice.key],
            successors: successors.into_iter().collect(),
            positions: slice.positions,
            deadline,
            verify: Vec::new(),
            part: None,
        }));
        self.repairs.insert(
            lease,
            Repair {
                slice: ix,
                worker,
                deadline,
                granted: self.now,
            },
        );
        true
    }

    /// Every successor of `slices` (all finished: they are a task's, ready or solved), sorted,
    /// each once, with the hash it was finished with.
    fn successors_with_hashes(&self, slices: impl Iterator<Item = SliceIx>) -> Vec<(SliceKey, Hash)> {
        let all: BTreeSet<(SliceKey, Hash)> = slices
            .flat_map(|ix| &self.slices[ix as usize].successors)
            .map(|&s| {
                let slice = &self.slices[s as usize];
                (
                    slice.key,
                    slice.finished.expect("a task's successors are finished"),
                )
            })
            .collect();
        all.into_iter().collect()
    }

    /// Leases the oldest solved task waiting for a verification that `worker` did not solve:
    /// `false` if there is none.
    fn lease_verification(&mut self, worker: WorkerId, out: &mut Vec<Action>) -> bool {
        let Some((&t, _)) = self
            .unverified
            .iter()
            .find(|(_, u)| u.lease.is_none() && u.solver != worker)
        else {
            return false;
        };
        let lease = LeaseId(self.fresh_id());
        let u = self.unverified.get_mut(&t).expect("found above");
        u.lease = Some(lease);
        let slices = u.slices.clone();
        let successors = self.successors_with_hashes(slices.iter().map(|&(ix, _)| ix));
        let deadline = self.now + self.config.lease_ttl;
        out.push(Action::Lease(LeasedTask {
            lease,
            worker,
            job: self.tasks[t as usize].job,
            slices: slices
                .iter()
                .map(|&(ix, _)| self.slices[ix as usize].key)
                .collect(),
            successors,
            positions: slices
                .iter()
                .map(|&(ix, _)| self.slices[ix as usize].positions)
                .sum(),
            deadline,
            verify: slices.iter().map(|&(_, h)| h).collect(),
            part: None,
        }));
        self.verifications.insert(
            lease,
            Verification {
                task: t,
                worker,
                deadline,
                granted: self.now,
            },
        );
        true
    }

    /// A verification's outcome: its slices finished, or its task leased again to be solved
    /// again (the coordinator confirmed one of them wrong).
    fn verified(&mut self, lease: LeaseId, agreed: bool, out: &mut Vec<Action>) {
        let Some(v) = self.verifications.remove(&lease) else {
            out.push(Action::Rejected {
                lease,
                reason: Rejection::NotAVerification { lease },
            });
            return;
        };
        if let Some(w) = self.workers.get_mut(&v.worker) {
            w.last_seen = self.now;
        }
        let u = self
            .unverified
            .remove(&v.task)
            .expect("a verification's task waits for it");
        if !agreed {
            let task = &mut self.tasks[v.task as usize];
            task.state = TaskState::Ready;
            self.ready.insert(v.task);
            out.push(Action::Accepted {
                lease,
                new: 0,
                duplicates: 0,
            });
            return;
        }
        let (mut done_tasks, mut done_jobs) = (Vec::new(), Vec::new());
        let count = u.slices.len();
        for (ix, hash) in u.slices {
            self.finish(ix, hash, out, &mut done_tasks, &mut done_jobs);
        }
        for t in done_tasks {
            self.tasks[t as usize].state = TaskState::Done;
        }
        out.push(Action::Accepted {
            lease,
            new: count,
            duplicates: 0,
        });
        out.extend(done_jobs.into_iter().map(|job| Action::JobDone { job }));
    }

    /// The successors of slice `ix`: those it was linked to when a job planned it, or, for a
    /// slice finished before any job planned it (resumed from the journal, adopted from a
    /// table), those of its key that the scheduler knows (all finished, as it is).
    fn successors_of(&self, ix: SliceIx) -> Vec<SliceIx> {
        let slice = &self.slices[ix as usize];
        if !slice.successors.is_empty() {
            return slice.successors.clone();
        }
        let keys = slice.key.successors();
        keys.iter().filter_map(|k| self.index.get(k).copied()).collect()
    }

    fn heartbeat(&mut self, worker: WorkerId, leases: Vec<LeaseId>, out: &mut Vec<Action>) {
        let Some(w) = self.workers.get_mut(&worker) else {
            out.push(Action::LeaseStatus {
                valid: Vec::new(),
                lost: leases,
                unknown_worker: true,
            });
            return;
        };
        w.last_seen = self.now;
        let (mut valid, mut lost, mut too_old) = (Vec::new(), Vec::new(), Vec::new());
        for id in leases {
            let held = match (
                self.leases.get_mut(&id),
                self.repairs.get_mut(&id),
                self.verifications.get_mut(&id),
                self.helpers.get_mut(&id),
            ) {
                (Some(l), _, _, _) if l.worker == worker => Some((l.granted, &mut l.deadline)),
                (_, Some(r), _, _) if r.worker == worker => Some((r.granted, &mut r.deadline)),
                (_, _, Some(v), _) if v.worker == worker => Some((v.granted, &mut v.deadline)),
                (_, _, _, Some(h)) if h.worker == worker => Some((h.granted, &mut h.deadline)),
                _ => None,
            };
            match held {
                Some((granted, _)) if self.now.saturating_sub(granted) >= self.config.max_lease_lifetime => {
                    too_old.push(id);
                    lost.push(id);
                }
                Some((_, deadline)) => {
                    *deadline = self.now + self.config.lease_ttl;
                    valid.push(id);
                }
                None => lost.push(id),
            }
        }
        for id in too_old {
            // A part of a group that expired with an earlier one is gone already.
            if self.is_live(id) {
                self.expire(id, out);
            }
        }
        out.push(Action::LeaseStatus {
            valid,
            lost,
            unknown_worker: false,
        });
    }

    fn complete(&mut self, lease: LeaseId, results: &[SliceResult], out: &mut Vec<Action>) {
        if let Some(l) = self.leases.get(&lease) {
            if let Some(w) = self.workers.get_mut(&l.worker) {
                w.last_seen = self.now;
            }
        }
        // A helper part: done once it gave the leader its values; it reports no slice (the
        // leader does).
        if let Some(h) = self.helpers.get(&lease) {
            if let Some(r) = results.first() {
                out.push(Action::Rejected {
                    lease,
                    reason: Rejection::NotTheTask { key: r.key },
                });
                return;
            }
            if let Some(w) = self.workers.get_mut(&h.worker) {
                w.last_seen = self.now;
            }
            let h = self.helpers.remove(&lease).expect("found above");
            let g = self.groups.get_mut(&h.group).expect("a helper's group");
            g.helpers[h.index as usize - 1] = Slot::Done;
            out.push(Action::Accepted {
                lease,
                new: 0,
                duplicates: 0,
            });
            return;
        }
        // A repair: its one slice, with the recorded hash (checked like any finished one). Any
        // other report under a repair lease is taken slice by slice, as below.
        let repaired = self
            .repairs
            .get(&lease)
            .map(|r| self.slices[r.slice as usize].key)
            .filter(|&key| matches!(results, [one] if one.key == key));
        if let Some(key) = repaired {
            let (mut new, mut duplicates) = (HashMap::new(), 0);
            if let Err(reason) = self.check_result(&results[0], &mut new, &mut duplicates) {
                out.push(Action::Rejected { lease, reason });
                return;
            }
            let r = self.repairs.remove(&lease).expect("a repair lease");
            if let Some(w) = self.workers.get_mut(&r.worker) {
                w.last_seen = self.now;
            }
            out.push(Action::Repaired { key });
            out.push(Action::Accepted {
                lease,
                new: 0,
                duplicates: 1,
            });
            return;
        }
        // Check everything before recording anything.
        let mut new: HashMap<SliceIx, Hash> = HashMap::new();
        let mut duplicates = 0;
        for r in results {
            if let Err(reason) = self.check_result(r, &mut new, &mut duplicates) {
                out.push(Action::Rejected { lease, reason });
                return;
            }
        }
        let mut new: Vec<(SliceIx, Hash)> = new.into_iter().collect();
        new.sort_unstable();
        let count = new.len();
        if self.config.verify_all && count > 0 {
            self.await_verification(lease, new, duplicates, out);
            return;
        }
        let mut done_tasks = Vec::new();
        let mut done_jobs = Vec::new();
        for (ix, hash) in new {
            self.finish(ix, hash, out, &mut done_tasks, &mut done_jobs);
        }
        for t in done_tasks {
            if let TaskState::Leased(holder) = self.tasks[t as usize].state {
                let l = self
                    .leases
                    .remove(&holder)
                    .expect("a leased task has a live lease");
                self.end_group(holder, false, out);
                if holder != lease {
                    out.push(Action::Revoked {
                        lease: holder,
                        worker: l.worker,
                    });
                }
            }
            self.ready.remove(&t);
            self.tasks[t as usize].state = TaskState::Done;
        }
        out.push(Action::Accepted {
            lease,
            new: count,
            duplicates,
        });
        out.extend(done_jobs.into_iter().map(|job| Action::JobDone { job }));
    }

    /// Under [`Config::verify_all`]: the slices a completion solved (`new`, every unfinished
    /// slice of the lease's task and nothing else) wait for a verification, the lease ends.
    fn await_verification(
        &mut self,
        lease: LeaseId,
        new: Vec<(SliceIx, Hash)>,
        duplicates: usize,
        out: &mut Vec<Action>,
    ) {
        let Some(l) = self.leases.get(&lease) else {
            let key = self.slices[new[0].0 as usize].key;
            out.push(Action::Rejected {
                lease,
                reason: Rejection::NotTheTask { key },
            });
            return;
        };
        let unfinished = self.unfinished(l.task);
        let reported: Vec<SliceIx> = new.iter().map(|&(ix, _)| ix).collect();
        if reported != unfinished {
            let odd = reported
                .iter()
                .chain(&unfinished)
                .find(|ix| !(reported.contains(ix) && unfinished.contains(ix)))
                .copied()
                .unwrap_or(reported[0]);
            out.push(Action::Rejected {
                lease,
                reason: Rejection::NotTheTask {
                    key: self.slices[odd as usize].key,
                },
            });
            return;
        }
        let l = self.leases.remove(&lease).expect("checked above");
        self.end_group(lease, false, out);
        self.tasks[l.task as usize].state = TaskState::Verifying;
        let count = new.len();
        self.unverified.insert(
            l.task,
            Unverified {
                slices: new,
                solver: l.worker,
                lease: None,
            },
        );
        out.push(Action::Accepted {
            lease,
            new: count,
            duplicates,
        });
    }

    fn check_result(
        &self,
        r: &SliceResult,
        new: &mut HashMap<SliceIx, Hash>,
        duplicates: &mut usize,
    ) -> Result<(), Rejection> {
        let key = r.key;
        let &ix = self.index.get(&key).ok_or(Rejection::UnknownSlice { key })?;
        let slice = &self.slices[ix as usize];
        if r.positions != slice.positions {
            return Err(Rejection::PositionsMismatch {
                key,
                expected: slice.positions,
                reported: r.positions,
            });
        }
        if let Some(recorded) = slice.finished {
            if recorded != r.hash {
                return Err(Rejection::HashMismatch {
                    key,
                    recorded,
                    reported: r.hash,
                });
            }
            *duplicates += 1;
            return Ok(());
        }
        let Some(task) = slice.task else {
            return Err(Rejection::UnknownSlice { key });
        };
        if self.tasks[task as usize].state == TaskState::Verifying {
            return Err(Rejection::AwaitingVerification { key });
        }
        if slice.unfinished_successors > 0 {
            let successor = slice
                .successors
                .iter()
                .map(|&s| &self.slices[s as usize])
                .find(|s| s.finished.is_none())
                .expect("an unfinished successor")
                .key;
            return Err(Rejection::SuccessorNotFinished { key, successor });
        }
        match new.insert(ix, r.hash) {
            Some(earlier) if earlier != r.hash => Err(Rejection::ConflictingReport { key }),
            Some(_) => {
                *duplicates += 1;
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// Records a slice as finished and releases what waited on it.
    fn finish(
        &mut self,
        ix: SliceIx,
        hash: Hash,
        out: &mut Vec<Action>,
        done_tasks: &mut Vec<TaskIx>,
        done_jobs: &mut Vec<JobId>,
    ) {
        let slice = &mut self.slices[ix as usize];
        debug_assert!(slice.finished.is_none() && slice.unfinished_successors == 0);
        slice.finished = Some(hash);
        out.push(Action::SliceFinished(SliceResult {
            key: slice.key,
            hash,
            positions: slice.positions,
        }));
        let positions = slice.positions;
        let dependents = std::mem::take(&mut slice.dependents);
        let task = slice.task.expect("only slices of a task are finished here");
        for &j in &slice.jobs {
            let job = &mut self.jobs[j as usize];
            job.slices_done += 1;
            job.positions_done += positions;
            if job.slices_done == job.slices_total {
                done_jobs.push(job.id);
            }
        }
        let t = &mut self.tasks[task as usize];
        t.unfinished -= 1;
        if t.unfinished == 0 {
            done_tasks.push(task);
        }
        for d in dependents {
            let dep = &mut self.slices[d as usize];
            dep.unfinished_successors -= 1;
            if dep.unfinished_successors == 0 {
                let dt = dep.task.expect("a dependent belongs to a task");
                let t = &mut self.tasks[dt as usize];
                t.waiting -= 1;
                if t.waiting == 0 && t.state == TaskState::Blocked {
                    t.state = TaskState::Ready;
                    self.ready.insert(dt);
                }
            }
        }
    }

    fn expire_leases(&mut self, out: &mut Vec<Action>) {
        let now = self.now;
        let tasks = self
            .leases
            .iter()
            .filter(|(_, l)| l.deadline <= now)
            .map(|(&id, _)| id);
        let repairs = self
            .repairs
            .iter()
            .filter(|(_, r)| r.deadline <= now)
            .map(|(&id, _)| id);
        let verifications = self
            .verifications
            .iter()
            .filter(|(_, v)| v.deadline <= now)
            .map(|(&id, _)| id);
        let helpers = self
            .helpers
            .iter()
            .filter(|(_, h)| h.deadline <= now)
            .map(|(&id, _)| id);
        let due: Vec<LeaseId> = tasks.chain(repairs).chain(verifications).chain(helpers).collect();
        for lease in due {
            // A part of a group that expired with an earlier one is gone already.
            if self.is_live(lease) {
                self.expire(lease, out);
            }
        }
        self.end_unfillable_groups(out);
    }

    /// Whether `lease` is a live lease of any kind.
    fn is_live(&self, lease: LeaseId) -> bool {
        self.leases.contains_key(&lease)
            || self.repairs.contains_key(&lease)
            || self.verifications.contains_key(&lease)
            || self.helpers.contains_key(&lease)
    }

    fn expire(&mut self, lease: LeaseId, out: &mut Vec<Action>) {
        if let Some(v) = self.verifications.remove(&lease) {
            // The task waits for another verification lease.
            if let Some(u) = self.unverified.get_mut(&v.task) {
                u.lease = None;
            }
            out.push(Action::Expired {
                lease,
                worker: v.worker,
            });
            return;
        }
        if let Some(r) = self.repairs.remove(&lease) {
            // The slice waits for another repair lease.
            self.lost.insert(r.slice);
            out.push(Action::Expired {
                lease,
                worker: r.worker,
            });
            return;
        }
        if let Some(h) = self.helpers.remove(&lease) {
            // A part lost: its group ends, and the slice is leased again.
            let g = self.groups.get_mut(&h.group).expect("a helper's group");
            g.helpers[h.index as usize - 1] = Slot::Open;
            out.push(Action::Expired {
                lease,
                worker: h.worker,
            });
            self.end_group(h.group, true, out);
            return;
        }
        let l = self.leases.remove(&lease).expect("a live lease");
        self.end_group(lease, false, out);
        let task = &mut self.tasks[l.task as usize];
        debug_assert_eq!(task.state, TaskState::Leased(lease));
        debug_assert!(task.unfinished > 0 && task.waiting == 0);
        task.state = TaskState::Ready;
        self.ready.insert(l.task);
        out.push(Action::Expired {
            lease,
            worker: l.worker,
        });
    }

    fn forget_silent_workers(&mut self, out: &mut Vec<Action>) {
        let now = self.now;
        let timeout = self.config.worker_timeout;
        let silent: Vec<WorkerId> = self
            .workers
            .iter()
            .filter(|(_, w)| w.last_seen.saturating_add(timeout) <= now)
            .map(|(&id, _)| id)
            .collect();
        for worker in silent {
            for lease in self.leases_of(worker) {
                if self.is_live(lease) {
                    self.expire(lease, out);
                }
            }
            self.workers.remove(&worker);
            out.push(Action::WorkerForgotten { worker });
        }
    }

    /// Checks the scheduler's internal bookkeeping; panics on the first inconsistency.
    #[cfg(test)]
    fn check_invariants(&self) {
        // A slice is in one task and a task has at most one live lease, so no slice is in two.
        let mut leased: HashMap<TaskIx, LeaseId> = HashMap::new();
        for (&id, l) in &self.leases {
            assert_eq!(self.tasks[l.task as usize].state, TaskState::Leased(id), "{id}");
            assert!(l.deadline > self.now, "{id} outlived its deadline");
            if let Some(other) = leased.insert(l.task, id) {
                panic!("task {} leased as {other} and {id}", l.task);
            }
        }
        for (ix, s) in self.slices.iter().enumerate() {
            if let Some(t) = s.task {
                assert!(self.tasks[t as usize].slices.contains(&(ix as SliceIx)));
            }
        }
        // A lost slice is finished, and waits for a repair lease or holds one, not both.
        for (&id, r) in &self.repairs {
            assert!(self.slices[r.slice as usize].finished.is_some(), "{id}");
            assert!(!self.lost.contains(&r.slice), "{id}");
            assert!(r.deadline > self.now, "{id} outlived its deadline");
        }
        for &ix in &self.lost {
            assert!(self.slices[ix as usize].finished.is_some());
        }
        for (t, task) in self.tasks.iter().enumerate() {
            let unfinished: Vec<&Slice> = task
                .slices
                .iter()
                .map(|&ix| &self.slices[ix as usize])
                .filter(|s| s.finished.is_none())
                .collect();
            assert_eq!(task.unfinished as usize, unfinished.len());
            let waiting = unfinished.iter().filter(|s| s.unfinished_successors > 0).count();
            assert_eq!(task.waiting as usize, waiting);
            for s in &unfinished {
                let n = s
                    .successors
                    .iter()
                    .filter(|&&x| self.slices[x as usize].finished.is_none())
                    .count();
                assert_eq!(s.unfinished_successors as usize, n, "{}", s.key);
            }
            let expected = match (task.unfinished, task.waiting) {
                (0, _) => TaskState::Done,
                (_, 0) if matches!(task.state, TaskState::Leased(_) | TaskState::Verifying) => task.state,
                (_, 0) => TaskState::Ready,
                _ => TaskState::Blocked,
            };
            assert_eq!(task.state, expected, "task {t}");
            assert_eq!(
                self.ready.contains(&(t as TaskIx)),
                task.state == TaskState::Ready,
                "task {t}"
            );
        }
        for job in &self.jobs {
            assert!(job.slices_done <= job.slices_total);
        }
        // A task waiting for a verification holds every unfinished slice of it, and its lease
        // (if any) is a live verification of it, not of its solver.
        for (t, task) in self.tasks.iter().enumerate() {
            let t = t as TaskIx;
            assert_eq!(
                task.state == TaskState::Verifying,
                self.unverified.contains_key(&t),
                "task {t}"
            );
        }
        for (&t, u) in &self.unverified {
            let unfinished: Vec<SliceIx> = self.tasks[t as usize]
                .slices
                .iter()
                .copied()
                .filter(|&ix| self.slices[ix as usize].finished.is_none())
                .collect();
            let held: Vec<SliceIx> = u.slices.iter().map(|&(ix, _)| ix).collect();
            assert_eq!(held, unfinished, "task {t}");
            if let Some(l) = u.lease {
                assert_eq!(self.verifications[&l].task, t);
                assert_ne!(
                    self.verifications[&l].worker, u.solver,
                    "task {t} verified by its solver"
                );
            }
        }
        for (&id, v) in &self.verifications {
            assert_eq!(self.unverified[&v.task].lease, Some(id));
            assert!(v.deadline > self.now, "{id} outlived its deadline");
        }
        // A group lives with its leader's lease; its leased parts are live helper leases, each
        // of another worker.
        for (&group, g) in &self.groups {
            let leader = &self.leases[&group];
            let mut workers = vec![leader.worker];
            for (i, slot) in g.helpers.iter().enumerate() {
                if let Slot::Leased(id) = slot {
                    let h = &self.helpers[id];
                    assert_eq!((h.group, h.index as usize), (group, i + 1), "{id}");
                    workers.push(h.worker);
                }
            }
            let all = workers.len();
            workers.sort();
            workers.dedup();
            assert_eq!(workers.len(), all, "{group}: a worker holds two parts");
        }
        for (&id, h) in &self.helpers {
            assert_eq!(
                self.groups[&h.group].helpers[h.index as usize - 1],
                Slot::Leased(id)
            );
            assert!(h.deadline > self.now, "{id} outlived its deadline");
        }
    }
}

fn progress(j: &Job) -> JobProgress {
    JobProgress {
        slices_done: j.slices_done,
        slices_total: j.slices_total,
        positions_done: j.positions_done,
        positions_total: j.positions_total,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashMap, HashSet};
    use std::sync::LazyLock;

    use proptest::prelude::*;

    use super::*;
    use crate::plan::plan;

    static KPK: LazyLock<Plan> = LazyLock::new(|| plan(&["KPvK".parse().unwrap()]));
    static KPKP: LazyLock<Plan> = LazyLock::new(|| plan(&["KPvKP".parse().unwrap()]));
    static KQKR: LazyLock<Plan> = LazyLock::new(|| plan(&["KQvKR".parse().unwrap()]));
    static KRKN: LazyLock<Plan> = LazyLock::new(|| plan(&["KRvKN".parse().unwrap()]));

    const TTL: Millis = 1_000;

    fn config() -> Config {
        Config {
            lease_ttl: TTL,
            max_lease_lifetime: 1000 * TTL,
            worker_timeout: 3 * TTL,
            target_task_positions: 1 << 16,
            max_leases_per_worker: 4,
            first_id: 1,
            verify_all: false,
            parts: 1,
            split_over: 1 << 30,
            splittable: |_| false,
        }
    }

    /// [`config`] with the slices of at least `split_over` positions that can be cut solved in
    /// up to 3 parts.
    fn config_in_parts(split_over: u64) -> Config {
        Config {
            parts: 3,
            split_over,
            splittable: zermelo_worker::solver::splittable,
            ..config()
        }
    }

    /// What an honest worker computes for a slice: a function of the key alone.
    fn true_hash(key: &SliceKey) -> Hash {
        let mut h = [0u8; 32];
        h[..8].copy_from_slice(&key.white_pawns.0.to_le_bytes());
        h[8..16].copy_from_slice(&key.black_pawns.0.to_le_bytes());
        for (i, b) in key.material.to_string().bytes().enumerate() {
            h[16 + i % 16] ^= b;
        }
        h
    }

    fn result(key: SliceKey) -> SliceResult {
        SliceResult {
            key,
            hash: true_hash(&key),
            positions: SliceIndexer::new(key).size(),
        }
    }

    fn results(task: &LeasedTask) -> Vec<SliceResult> {
        task.slices.iter().map(|&k| result(k)).collect()
    }

    fn plan_slices(plan: &Plan) -> Vec<SliceKey> {
        plan.materials.iter().flat_map(|m| m.slices()).copied().collect()
    }

    /// Runs a scheduler and checks every action against a model of what must hold.
    struct Sim {
        s: Scheduler,
        now: Millis,
        /// Every slice the scheduler knows of, with its successors.
        successors: HashMap<SliceKey, Vec<SliceKey>>,
        finished: HashMap<SliceKey, Hash>,
        /// Leases the scheduler handed out and has not ended.
        live: BTreeMap<LeaseId, LeasedTask>,
        /// Leases that expired or were revoked: their workers may still complete them, late.
        stale: Vec<LeasedTask>,
        workers: Vec<WorkerId>,
        jobs: HashMap<JobId, Vec<SliceKey>>,
        jobs_done: HashSet<JobId>,
        leases_granted: usize,
        expired: usize,
        /// Finished slices whose stored copy was lost, not repaired yet.
        lost: HashSet<SliceKey>,
        /// Live repair leases.
        repairs: BTreeMap<LeaseId, LeasedTask>,
    }

    impl Sim {
        fn new(s: Scheduler, finished: HashMap<SliceKey, Hash>) -> Sim {
            Sim {
                s,
                now: 0,
                successors: HashMap::new(),
                finished,
                live: BTreeMap::new(),
                stale: Vec::new(),
                workers: Vec::new(),
                jobs: HashMap::new(),
                jobs_done: HashSet::new(),
                leases_granted: 0,
                expired: 0,
                lost: HashSet::new(),
                repairs: BTreeMap::new(),
            }
        }

        fn step(&mut self, event: Event) -> Vec<Action> {
            let actions = self.s.handle(self.now, event);
            self.observe(&actions);
            self.s.check_invariants();
            actions
        }

        fn submit(&mut self, job: JobId, plan: &Plan) -> Vec<Action> {
            let mut keys = plan_slices(plan);
            keys.sort();
            keys.dedup();
            for k in &keys {
                self.successors.entry(*k).or_insert_with(|| k.successors());
            }
            let known = self.jobs.contains_key(&job);
            let actions = self.step(Event::JobSubmitted {
                job,
                plan: plan.clone(),
            });
            if !known {
                self.jobs.insert(job, keys);
            }
            actions
        }

        fn register(&mut self) -> WorkerId {
            match self.step(Event::WorkerRegistered)[..] {
                // Leases that ran out before this event expire first.
                [.., Action::Registered { worker, lease_ttl }] => {
                    assert_eq!(lease_ttl, TTL);
                    self.workers.push(worker);
                    worker
                }
                ref other => panic!("{other:?}"),
            }
        }

        fn observe(&mut self, actions: &[Action]) {
            for a in actions {
                match a {
                    Action::Lease(t) => {
                        self.leases_granted += 1;
                        assert!(!t.slices.is_empty());
                        assert_eq!(t.deadline, self.now + TTL);
                        let mut expected: Vec<SliceKey> = t
                            .slices
                            .iter()
                            .flat_map(|k| self.successors[k].iter().copied())
                            .collect();
                        expected.sort();
                        expected.dedup();
                        let keys: Vec<SliceKey> = t.successors.iter().map(|(k, _)| *k).collect();
                        assert_eq!(keys, expected, "{}: successors", t.lease);
                        for (succ, hash) in &t.successors {
                            assert_eq!(
                                self.finished.get(succ),
                                Some(hash),
                                "{} leased before its successor {succ}, or with another hash",
                                t.lease
                            );
                        }
                        if let [k] = t.slices[..] {
                            if self.lost.contains(&k) {
                                // A repair: one lost slice, its successors whole.
                                for (succ, _) in &t.successors {
                                    assert!(!self.lost.contains(succ), "{k} repaired before {succ}");
                                }
                                assert!(self.repairs.values().all(|r| r.slices != t.slices));
                                self.repairs.insert(t.lease, t.clone());
                                continue;
                            }
                        }
                        let m = t.slices[0].material;
                        assert!(t.slices.iter().all(|k| k.material == m), "a task mixes materials");
                        if let Some(p) = t.part {
                            assert!(p.index < p.parts && p.parts > 1, "{p:?}");
                            assert_eq!(t.slices.len(), 1, "a task in parts has one slice");
                            if p.index == 0 {
                                assert_eq!(p.group, t.lease);
                            } else {
                                let leader = &self.live[&p.group];
                                assert_eq!(leader.slices, t.slices);
                                assert_ne!(leader.worker, t.worker, "two parts to one worker");
                            }
                        }
                        for k in &t.slices {
                            assert!(!self.finished.contains_key(k), "finished slice {k} leased again");
                            for other in self.live.values() {
                                let same_group =
                                    matches!((other.part, t.part), (Some(a), Some(b)) if a.group == b.group);
                                if same_group {
                                    continue;
                                }
                                assert!(
                                    !other.slices.contains(k),
                                    "{k} leased to {} and {}",
                                    other.lease,
                                    t.lease
                                );
                            }
                        }
                        let positions: u64 = t.slices.iter().map(|&k| SliceIndexer::new(k).size()).sum();
                        assert_eq!(t.positions, positions);
                        self.live.insert(t.lease, t.clone());
                    }
                    Action::SliceFinished(r) => {
                        assert_eq!(
                            r.hash,
                            true_hash(&r.key),
                            "a wrong hash was recorded for {}",
                            r.key
                        );
                        for succ in &self.successors[&r.key] {
                            assert!(
                                self.finished.contains_key(succ),
                                "{} finished before {succ}",
                                r.key
                            );
                        }
                        assert!(
                            self.finished.insert(r.key, r.hash).is_none(),
                            "{} finished twice",
                            r.key
                        );
                    }
                    Action::Expired { lease, .. } => {
                        self.expired += 1;
                        let t = self.live.remove(lease).or_else(|| self.repairs.remove(lease));
                        self.stale.push(t.expect("only a live lease expires"));
                    }
                    Action::RepairQueued { key, queued } => {
                        let repairing = self.repairs.values().any(|r| r.slices == [*key]);
                        let expected =
                            self.finished.contains_key(key) && !self.lost.contains(key) && !repairing;
                        assert_eq!(*queued, expected, "{key}");
                        if *queued {
                            self.lost.insert(*key);
                        }
                    }
                    Action::Repaired { key } => {
                        assert!(self.lost.remove(key), "{key} repaired but not lost");
                        let before = self.repairs.len();
                        self.repairs.retain(|_, r| r.slices != [*key]);
                        assert_eq!(self.repairs.len() + 1, before, "{key} repaired without its lease");
                    }
                    Action::Revoked { lease, .. } => {
                        let t = self.live.remove(lease).expect("only a live lease is revoked");
                        assert!(t.slices.iter().all(|k| self.finished.contains_key(k)));
                    }
                    Action::JobDone { job } => {
                        assert!(self.jobs_done.insert(*job), "{job} done twice");
                        for k in self.jobs.get(job).into_iter().flatten() {
                            assert!(self.finished.contains_key(k), "{job} done without {k}");
                        }
                    }
                    Action::Accepted { lease, .. } => {
                        // A helper part is done when it completes (with no slice).
                        if self
                            .live
                            .get(lease)
                            .is_some_and(|t| t.part.is_some_and(|p| p.index > 0))
                        {
                            self.live.remove(lease);
                        }
                    }
                    Action::JobAccepted { .. }
                    | Action::JobRejected { .. }
                    | Action::Registered { .. }
                    | Action::NoTask(_)
                    | Action::LeaseStatus { .. }
                    | Action::Rejected { .. }
                    | Action::WorkerForgotten { .. } => {}
                }
            }
            // A lease whose slices are all finished has ended (completed, or revoked above).
            let finished = &self.finished;
            self.live
                .retain(|_, t| !t.slices.iter().all(|k| finished.contains_key(k)));
            assert_eq!(self.live.len() + self.repairs.len(), self.s.live_leases());
            assert_eq!(self.lost.len(), self.s.slices_lost());
        }

        /// Completes `task` as an honest worker does: a helper part with no slice, any other
        /// task with its slices.
        fn complete(&mut self, task: &LeasedTask) -> Vec<Action> {
            let helper = task.part.is_some_and(|p| p.index > 0);
            let actions = self.step(Event::TaskCompleted {
                lease: task.lease,
                slices: if helper { Vec::new() } else { results(task) },
            });
            let accepted = actions
                .iter()
                .any(|a| matches!(a, Action::Accepted { lease, .. } if *lease == task.lease));
            assert!(
                accepted,
                "an honest completion of {} was not accepted: {actions:?}",
                task.lease
            );
            actions
        }

        /// One fresh worker solves everything that is left; time moves on when it must wait
        /// (so that abandoned leases expire).
        fn drain(&mut self) {
            let worker = self.register();
            for _ in 0..100_000 {
                let actions = self.step(Event::LeaseRequested { worker });
                match actions.last() {
                    Some(Action::Lease(t)) => {
                        let t = t.clone();
                        self.complete(&t);
                    }
                    Some(Action::NoTask(NoTask::Waiting)) => {
                        self.now += TTL;
                        self.step(Event::Heartbeat {
                            worker,
                            leases: vec![],
                        });
                    }
                    Some(Action::NoTask(NoTask::Idle)) => return,
                    other => panic!("{other:?}"),
                }
            }
            panic!("the jobs never finished");
        }

        fn assert_all_done(&self) {
            for (job, keys) in &self.jobs {
                assert!(self.jobs_done.contains(job), "{job} not done");
                let p = self.s.job(*job).unwrap();
                assert!(p.is_done());
                assert_eq!(p.slices_total as usize, keys.len());
            }
            assert!(self.live.is_empty());
            assert!(self.lost.is_empty() && self.repairs.is_empty(), "{:?}", self.lost);
        }
    }

    #[derive(Clone, Debug)]
    enum Op {
        Register,
        Request(usize),
        Heartbeat(usize),
        Complete(usize),
        CompleteLate(usize),
        WrongDuplicate(usize),
        Advance(Millis),
        Tick,
        Lose(usize),
        SubmitOther,
        LoseSlice(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            1 => Just(Op::Register),
            6 => any::<usize>().prop_map(Op::Request),
            3 => any::<usize>().prop_map(Op::Heartbeat),
            6 => any::<usize>().prop_map(Op::Complete),
            1 => any::<usize>().prop_map(Op::CompleteLate),
            1 => any::<usize>().prop_map(Op::WrongDuplicate),
            3 => (0..2 * TTL).prop_map(Op::Advance),
            1 => Just(Op::Tick),
            1 => any::<usize>().prop_map(Op::Lose),
            1 => Just(Op::SubmitOther),
            1 => any::<usize>().prop_map(Op::LoseSlice),
        ]
    }

    /// Random workers lease, heartbeat, complete (on time, late, or with a wrong hash for a
    /// finished slice), vanish, and time jumps; then one worker finishes the rest. Checked
    /// throughout by [`Sim::observe`] and [`Scheduler::check_invariants`]: nothing is leased
    /// before its successors are finished, no slice is in two live leases, every slice finishes
    /// once with the honest hash, expired leases are leased again, and every job ends done.
    fn run(main: &Plan, other: &Plan, ops: Vec<Op>) {
        run_with(config(), main, other, ops)
    }

    fn run_with(config: Config, main: &Plan, other: &Plan, ops: Vec<Op>) {
        let mut sim = Sim::new(Scheduler::new(config), HashMap::new());
        sim.submit(JobId(1), main);
        let pick = |n: usize, i: usize| if n == 0 { None } else { Some(i % n) };
        for op in ops {
            match op {
                Op::Register => {
                    sim.register();
                }
                Op::Request(i) => {
                    if let Some(i) = pick(sim.workers.len(), i) {
                        let worker = sim.workers[i];
                        let actions = sim.step(Event::LeaseRequested { worker });
                        if let Some(Action::NoTask(NoTask::Idle)) = actions.last() {
                            assert!(sim.s.jobs().all(|(_, p)| p.is_done()));
                        }
                    }
                }
                Op::Heartbeat(i) => {
                    if let Some(i) = pick(sim.workers.len(), i) {
                        let worker = sim.workers[i];
                        let mine: Vec<LeaseId> = sim
                            .live
                            .values()
                            .filter(|t| t.worker == worker)
                            .map(|t| t.lease)
                            .collect();
                        let stale: Vec<LeaseId> = sim
                            .stale
                            .iter()
                            .filter(|t| t.worker == worker)
                            .map(|t| t.lease)
                            .collect();
                        let leases = [mine.clone(), stale.clone()].concat();
                        match &sim.step(Event::Heartbeat { worker, leases })[..] {
                            [.., Action::LeaseStatus {
                                valid,
                                lost,
                                unknown_worker,
                            }] => {
                                if *unknown_worker {
                                    assert!(valid.is_empty());
                                } else {
                                    // Expiry runs first: a lease of ours may have just expired.
                                    let still: Vec<LeaseId> = mine
                                        .iter()
                                        .copied()
                                        .filter(|l| sim.live.contains_key(l))
                                        .collect();
                                    assert_eq!(valid, &still);
                                    assert_eq!(lost.len(), mine.len() + stale.len() - still.len());
                                }
                            }
                            other => panic!("{other:?}"),
                        }
                    }
                }
                Op::Complete(i) => {
                    let live: Vec<LeasedTask> =
                        sim.live.values().chain(sim.repairs.values()).cloned().collect();
                    if let Some(i) = pick(live.len(), i) {
                        sim.complete(&live[i]);
                    }
                }
                Op::CompleteLate(i) => {
                    if let Some(i) = pick(sim.stale.len(), i) {
                        let t = sim.stale[i].clone();
                        sim.complete(&t);
                    }
                }
                Op::WrongDuplicate(i) => {
                    let mut done: Vec<SliceKey> = sim.finished.keys().copied().collect();
                    done.sort();
                    if let Some(i) = pick(done.len(), i) {
                        let mut r = result(done[i]);
                        r.hash[31] ^= 1;
                        let actions = sim.step(Event::TaskCompleted {
                            lease: LeaseId(i as u64),
                            slices: vec![r],
                        });
                        assert!(
                            matches!(
                                &actions[..],
                                [
                                    ..,
                                    Action::Rejected {
                                        reason: Rejection::HashMismatch { .. },
                                        ..
                                    }
                                ]
                            ),
                            "{actions:?}"
                        );
                        assert!(!actions.iter().any(|a| matches!(a, Action::SliceFinished(_))));
                    }
                }
                Op::Advance(ms) => sim.now += ms,
                Op::Tick => {
                    sim.step(Event::Tick);
                }
                Op::Lose(i) => {
                    if let Some(i) = pick(sim.workers.len(), i) {
                        let worker = sim.workers.remove(i);
                        sim.step(Event::WorkerLost { worker });
                    }
                }
                Op::LoseSlice(i) => {
                    let mut done: Vec<SliceKey> = sim.finished.keys().copied().collect();
                    done.sort();
                    if let Some(i) = pick(done.len(), i) {
                        sim.step(Event::SliceLost { key: done[i] });
                    }
                }
                Op::SubmitOther => {
                    let again = sim.jobs.contains_key(&JobId(2));
                    let actions = sim.submit(JobId(2), other);
                    if again {
                        assert!(
                            matches!(actions[..], [.., Action::JobRejected { .. }]),
                            "{actions:?}"
                        );
                    }
                }
            }
        }
        sim.drain();
        sim.assert_all_done();
        let all: HashSet<SliceKey> = sim.jobs.values().flatten().copied().collect();
        assert_eq!(sim.finished.len(), all.len(), "every slice finishes exactly once");
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        #[test]
        fn random_events_on_kpk_keep_every_invariant(ops in prop::collection::vec(op(), 0..300)) {
            run(&KPK, &KPKP, ops);
        }

        #[test]
        fn random_events_on_kpkp_keep_every_invariant(ops in prop::collection::vec(op(), 0..300)) {
            run(&KPKP, &KPK, ops);
        }

        /// The same with pawnless slices solved in parts by groups of workers: parts lost
        /// (expired, their workers gone), helpers completing before or after their leader,
        /// late completions of parts of failed groups.
        #[test]
        fn random_events_with_slices_in_parts_keep_every_invariant(ops in prop::collection::vec(op(), 0..300)) {
            run_with(config_in_parts(1 << 12), &KQKR, &KRKN, ops);
        }
    }

    fn first_lease(sim: &mut Sim, worker: WorkerId) -> LeasedTask {
        match sim.step(Event::LeaseRequested { worker }).pop() {
            Some(Action::Lease(t)) => t,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn single_worker_finishes_kpkp_and_everything_below() {
        let mut sim = Sim::new(Scheduler::new(config()), HashMap::new());
        sim.submit(JobId(1), &KPKP);
        sim.drain();
        sim.assert_all_done();
        assert_eq!(sim.finished.len(), plan_slices(&KPKP).len());
        assert_eq!(sim.expired, 0);
    }

    /// Tasks of tiny pawn slices hold at least half the target or a whole wave, and never mix
    /// waves (their slices must be independent).
    #[test]
    fn tiny_pawn_slices_share_a_task() {
        let target = 1 << 20;
        let cfg = Config {
            target_task_positions: target,
            ..config()
        };
        let mut sim = Sim::new(Scheduler::new(cfg), HashMap::new());
        sim.submit(JobId(1), &KPKP);
        let mut wave_of: HashMap<SliceKey, (usize, usize)> = HashMap::new();
        for (m, mp) in KPKP.materials.iter().enumerate() {
            for (w, wave) in mp.waves.iter().enumerate() {
                for k in wave {
                    wave_of.insert(*k, (m, w));
                }
            }
        }
        let worker = sim.register();
        let mut leases = 0;
        loop {
            let t = match sim.step(Event::LeaseRequested { worker }).pop() {
                Some(Action::Lease(t)) => t,
                Some(Action::NoTask(NoTask::Idle)) => break,
                other => panic!("{other:?}"),
            };
            leases += 1;
            let (m, w) = wave_of[&t.slices[0]];
            assert!(
                t.slices.iter().all(|k| wave_of[k] == (m, w)),
                "a task mixes waves"
            );
            let whole_wave = t.slices.len() == KPKP.materials[m].waves[w].len();
            assert!(
                t.positions >= target / 2 || whole_wave,
                "{} positions in {} slices",
                t.positions,
                t.slices.len()
            );
            sim.complete(&t);
        }
        let slices = plan_slices(&KPKP).len();
        assert!(leases * 10 < slices, "{leases} leases for {slices} slices");
    }

    /// A slice finished before any job planned it (resumed from a journal) is repaired with
    /// the successors of its key, each with the hash it was finished with.
    #[test]
    fn a_lost_slice_resumed_from_the_journal_is_repaired_with_its_successors() {
        let keys = plan_slices(&KPK);
        let finished: Vec<SliceResult> = keys.iter().map(|&k| result(k)).collect();
        let s = Scheduler::resume(config(), finished.clone()).unwrap();
        let mut sim = Sim::new(s, finished.iter().map(|r| (r.key, r.hash)).collect());
        sim.submit(JobId(1), &KPK);
        let a = sim.register();
        let key = *keys
            .iter()
            .find(|k| k.material.has_pawns() && !k.successors().is_empty())
            .unwrap();
        sim.step(Event::SliceLost { key });
        let repair = first_lease(&mut sim, a);
        assert_eq!(repair.slices, [key]);
        let mut expected: Vec<(SliceKey, Hash)> =
            key.successors().iter().map(|&k| (k, true_hash(&k))).collect();
        expected.sort();
        expected.dedup();
        assert_eq!(repair.successors, expected);
        let actions = sim.complete(&repair);
        assert!(actions.contains(&Action::Repaired { key }), "{actions:?}");
        sim.drain();
        sim.assert_all_done();
    }

    #[test]
    fn lost_slices_are_solved_again_first_deepest_first_and_only_with_their_hash() {
        let mut sim = Sim::new(Scheduler::new(config()), HashMap::new());
        sim.submit(JobId(1), &KPK);
        let a = sim.register();
        // Solve until a finished slice leads into another finished one.
        let (above, deep) = loop {
            let t = first_lease(&mut sim, a);
            sim.complete(&t);
            let pair = t
                .slices
                .iter()
                .find_map(|k| sim.successors[k].first().map(|d| (*k, *d)));
            if let Some(pair) = pair {
                break pair;
            }
        };
        // Lost: a slice, twice (queued once), and a slice nobody finished (not queued).
        let queued = |actions: &[Action]| match actions {
            [Action::RepairQueued { queued, .. }] => *queued,
            other => panic!("{other:?}"),
        };
        assert!(queued(&sim.step(Event::SliceLost { key: deep })));
        assert!(!queued(&sim.step(Event::SliceLost { key: deep })));
        let unfinished = *sim
            .successors
            .keys()
            .find(|k| !sim.finished.contains_key(k))
            .unwrap();
        assert!(!queued(&sim.step(Event::SliceLost { key: unfinished })));
        // The repair comes before any task, with the slice's recorded successors.
        let repair = first_lease(&mut sim, a);
        assert_eq!(repair.slices, [deep]);
        // A repair reported with another hash is rejected, and the slice stays lost.
        let mut wrong = results(&repair);
        wrong[0].hash[0] ^= 1;
        let actions = sim.step(Event::TaskCompleted {
            lease: repair.lease,
            slices: wrong,
        });
        assert!(matches!(
            actions[..],
            [Action::Rejected {
                reason: Rejection::HashMismatch { .. },
                ..
            }]
        ));
        // Expired, it is leased again, to another worker.
        sim.now += TTL;
        let b = sim.register();
        let again = first_lease(&mut sim, b);
        assert_eq!(again.slices, [deep]);
        assert_eq!(sim.expired, 1);
        let actions = sim.complete(&again);
        assert!(actions.contains(&Action::Repaired { key: deep }), "{actions:?}");
        assert!(sim.lost.is_empty());
        // Two lost, one leading into the other: the deeper one is repaired first, and the
        // other is not leased while it is under way.
        sim.step(Event::SliceLost { key: above });
        sim.step(Event::SliceLost { key: deep });
        let r = first_lease(&mut sim, b);
        assert_eq!(r.slices, [deep]);
        let next = sim.step(Event::LeaseRequested { worker: a });
        assert!(
            !matches!(&next[..], [Action::Lease(t)] if t.slices == [above]),
            "{next:?}"
        );
        sim.complete(&r);
        let r = first_lease(&mut sim, b);
        assert_eq!(r.slices, [above]);
        sim.complete(&r);
        sim.drain();
        sim.assert_all_done();
    }

    /// Under `verify_all` a completed task's slices are finished only once a worker other than
    /// their solver has verified them (its lease names their uploaded hashes); a completion
    /// naming a slice that awaits its verification is rejected; an expired verification goes
    /// back in line; one that failed puts the task back to be solved again; and two workers
    /// finish the job, every slice with its true hash.
    #[test]
    fn with_verify_all_a_slice_is_finished_only_once_another_worker_verified_it() {
        let mut s = Scheduler::new(Config {
            verify_all: true,
            ..config()
        });
        let mut now = 0;
        let step = |s: &mut Scheduler, now: Millis, e: Event| {
            let actions = s.handle(now, e);
            s.check_invariants();
            actions
        };
        let lease = |s: &mut Scheduler, now: Millis, worker: WorkerId| match step(
            s,
            now,
            Event::LeaseRequested { worker },
        )
        .pop()
        {
            Some(Action::Lease(t)) => Some(t),
            Some(Action::NoTask(_)) => None,
            other => panic!("{other:?}"),
        };
        step(
            &mut s,
            now,
            Event::JobSubmitted {
                job: JobId(1),
                plan: KPK.clone(),
            },
        );
        let register = |s: &mut Scheduler| match step(s, 0, Event::WorkerRegistered).pop() {
            Some(Action::Registered { worker, .. }) => worker,
            other => panic!("{other:?}"),
        };
        let (a, b) = (register(&mut s), register(&mut s));
        let t = lease(&mut s, now, a).unwrap();
        assert!(t.verify.is_empty());
        let done = step(
            &mut s,
            now,
            Event::TaskCompleted {
                lease: t.lease,
                slices: results(&t),
            },
        );
        assert!(
            matches!(done[..], [Action::Accepted { new, .. }] if new == t.slices.len()),
            "{done:?}"
        );
        for k in &t.slices {
            assert_eq!(s.finished(k), None);
            assert_eq!(s.unverified(k), Some(true_hash(k)));
        }
        // A is not given its own work to verify: another task to solve.
        let other = lease(&mut s, now, a).unwrap();
        assert!(other.verify.is_empty() && other.slices != t.slices);
        // A completion naming a slice that awaits its verification finishes nothing.
        let mut sneaky = results(&other);
        sneaky.push(result(t.slices[0]));
        let rejected = step(
            &mut s,
            now,
            Event::TaskCompleted {
                lease: other.lease,
                slices: sneaky,
            },
        );
        assert!(
            matches!(
                &rejected[..],
                [Action::Rejected {
                    reason: Rejection::AwaitingVerification { .. },
                    ..
                }]
            ),
            "{rejected:?}"
        );
        // B verifies: the same slices, with the hashes they were uploaded with.
        let v = lease(&mut s, now, b).unwrap();
        assert_eq!(v.slices, t.slices);
        assert_eq!(v.verify, t.slices.iter().map(true_hash).collect::<Vec<_>>());
        let held = s.verification(v.lease).unwrap();
        assert_eq!((held.verifier, held.solver), (b, a));
        // Its lease runs out (A heartbeats its own): the verification goes back in line.
        now += TTL / 2;
        step(
            &mut s,
            now,
            Event::Heartbeat {
                worker: a,
                leases: vec![other.lease],
            },
        );
        now += TTL / 2;
        let expired = step(&mut s, now, Event::Tick);
        assert!(
            expired
                .iter()
                .any(|x| matches!(x, Action::Expired { lease, .. } if *lease == v.lease)),
            "{expired:?}"
        );
        assert_eq!(s.verification(v.lease), None);
        let v = lease(&mut s, now, b).unwrap();
        assert_eq!(v.slices, t.slices);
        // It fails: the task is solved again (the solver's refusal is the coordinator's).
        let failed = step(
            &mut s,
            now,
            Event::Verified {
                lease: v.lease,
                agreed: false,
            },
        );
        assert!(
            matches!(failed[..], [Action::Accepted { new: 0, .. }]),
            "{failed:?}"
        );
        assert!(t
            .slices
            .iter()
            .all(|k| s.finished(k).is_none() && s.unverified(k).is_none()));
        let again = step(
            &mut s,
            now,
            Event::Verified {
                lease: v.lease,
                agreed: true,
            },
        );
        assert!(matches!(again[..], [Action::Rejected { .. }]), "{again:?}");
        // Both workers finish the job, each verifying the other's work.
        step(
            &mut s,
            now,
            Event::TaskCompleted {
                lease: other.lease,
                slices: results(&other),
            },
        );
        let (mut finished, mut verified, mut job_done) = (HashMap::new(), 0, false);
        for i in 0..10_000 {
            let worker = if i % 2 == 0 { a } else { b };
            let Some(t) = lease(&mut s, now, worker) else {
                if s.job(JobId(1)).unwrap().is_done() {
                    break;
                }
                continue;
            };
            let event = if t.verify.is_empty() {
                Event::TaskCompleted {
                    lease: t.lease,
                    slices: results(&t),
                }
            } else {
                verified += t.slices.len();
                Event::Verified {
                    lease: t.lease,
                    agreed: true,
                }
            };
            for x in step(&mut s, now, event) {
                match x {
                    Action::SliceFinished(r) => assert!(finished.insert(r.key, r.hash).is_none()),
                    Action::JobDone { .. } => job_done = true,
                    _ => {}
                }
            }
        }
        assert!(job_done);
        let keys = plan_slices(&KPK);
        assert_eq!(finished.len(), keys.len());
        assert!(keys.iter().all(|k| finished[k] == true_hash(k)));
        assert_eq!(verified, keys.len(), "every slice verified once");
    }

    #[test]
    fn expired_lease_is_leased_again() {
        let mut sim = Sim::new(Scheduler::new(config()), HashMap::new());
        sim.submit(JobId(1), &KPK);
        let (a, b) = (sim.register(), sim.register());
        let first = first_lease(&mut sim, a);
        sim.now += TTL;
        let again = first_lease(&mut sim, b);
        assert_eq!(again.slices, first.slices);
        assert_ne!(again.lease, first.lease);
        assert_eq!(sim.expired, 1);
        match &sim.step(Event::Heartbeat {
            worker: a,
            leases: vec![first.lease],
        })[..]
        {
            [Action::LeaseStatus {
                valid,
                lost,
                unknown_worker: false,
            }] => {
                assert!(valid.is_empty());
                assert_eq!(lost, &[first.lease]);
            }
            other => panic!("{other:?}"),
        }
    }

    /// Found by the property test: the answer to an event comes after the expiries that the
    /// event's time caused, so a driver must look for its answer at the end, not the start.
    #[test]
    fn expiries_come_before_the_answer_to_the_event_that_noticed_them() {
        let mut sim = Sim::new(Scheduler::new(config()), HashMap::new());
        sim.submit(JobId(1), &KPK);
        let a = sim.register();
        let t = first_lease(&mut sim, a);
        sim.now += TTL;
        let actions = sim.step(Event::WorkerRegistered);
        assert!(matches!(
            actions[..],
            [Action::Expired { lease, worker }, Action::Registered { .. }] if lease == t.lease && worker == a
        ));
        assert_eq!(sim.s.workers_alive(), 2);
    }

    #[test]
    fn heartbeats_keep_a_lease_alive() {
        let mut sim = Sim::new(Scheduler::new(config()), HashMap::new());
        sim.submit(JobId(1), &KPK);
        let (a, b) = (sim.register(), sim.register());
        let t = first_lease(&mut sim, a);
        for _ in 0..10 {
            sim.now += TTL - 1;
            match &sim.step(Event::Heartbeat {
                worker: a,
                leases: vec![t.lease],
            })[..]
            {
                [Action::LeaseStatus { valid, .. }] => assert_eq!(valid, &[t.lease]),
                other => panic!("{other:?}"),
            }
        }
        let other = first_lease(&mut sim, b);
        assert_ne!(other.slices, t.slices);
        sim.complete(&t);
        assert_eq!(sim.expired, 0);
    }

    /// Past its maximum lifetime a lease is not renewed by a heartbeat: the worker hears it is
    /// lost, the lease expires at once and its task goes to another worker.
    #[test]
    fn heartbeats_do_not_renew_a_lease_past_its_lifetime() {
        let mut config = config();
        config.max_lease_lifetime = 5 * TTL;
        let mut sim = Sim::new(Scheduler::new(config), HashMap::new());
        sim.submit(JobId(1), &KPK);
        let (a, b) = (sim.register(), sim.register());
        let t = first_lease(&mut sim, a);
        let beat = |sim: &mut Sim| {
            sim.step(Event::Heartbeat {
                worker: a,
                leases: vec![t.lease],
            })
        };
        for _ in 0..5 {
            sim.now += TTL - 1;
            match &beat(&mut sim)[..] {
                [Action::LeaseStatus { valid, .. }] => assert_eq!(valid, &[t.lease]),
                other => panic!("{other:?}"),
            }
        }
        sim.now += TTL - 1;
        let actions = beat(&mut sim);
        assert!(
            actions.iter().any(|a| matches!(a, Action::LeaseStatus { lost, valid, .. } if lost == &[t.lease] && valid.is_empty())),
            "{actions:?}"
        );
        assert!(
            actions
                .iter()
                .any(|a| matches!(a, Action::Expired { lease, .. } if *lease == t.lease)),
            "{actions:?}"
        );
        // The same slices go to b, which heartbeats them normally.
        let mut leased = Vec::new();
        loop {
            let u = first_lease(&mut sim, b);
            let done = u.slices == t.slices;
            leased.push(u);
            if done {
                break;
            }
            assert!(leased.len() < 10, "the expired task was not leased again");
        }
    }

    #[test]
    fn duplicate_completion_with_the_same_hash_is_accepted() {
        let mut sim = Sim::new(Scheduler::new(config()), HashMap::new());
        sim.submit(JobId(1), &KPK);
        let w = sim.register();
        let t = first_lease(&mut sim, w);
        sim.complete(&t);
        let actions = sim.complete(&t);
        assert_eq!(
            actions,
            [Action::Accepted {
                lease: t.lease,
                new: 0,
                duplicates: t.slices.len()
            }]
        );
    }

    #[test]
    fn duplicate_completion_with_another_hash_is_rejected() {
        let mut sim = Sim::new(Scheduler::new(config()), HashMap::new());
        sim.submit(JobId(1), &KPK);
        let w = sim.register();
        let t = first_lease(&mut sim, w);
        sim.complete(&t);
        let mut slices = results(&t);
        slices[0].hash[0] ^= 0xff;
        let actions = sim.step(Event::TaskCompleted {
            lease: t.lease,
            slices: slices.clone(),
        });
        let reason = Rejection::HashMismatch {
            key: t.slices[0],
            recorded: true_hash(&t.slices[0]),
            reported: slices[0].hash,
        };
        assert_eq!(
            actions,
            [Action::Rejected {
                lease: t.lease,
                reason: reason.clone()
            }]
        );
        assert!(reason.to_string().contains(&hex(&slices[0].hash)), "{reason}");
        assert_eq!(sim.s.finished(&t.slices[0]), Some(true_hash(&t.slices[0])));
    }

    /// A rejected completion records nothing, not even its good slices.
    #[test]
    fn rejected_completion_records_none_of_its_slices() {
        let mut sim = Sim::new(
            Scheduler::new(Config {
                target_task_positions: 1 << 30,
                ..config()
            }),
            HashMap::new(),
        );
        sim.submit(JobId(1), &KPK);
        let w = sim.register();
        // The four pawnless sub-tables first, then a wave of KPvK slices.
        let mut t = first_lease(&mut sim, w);
        while t.slices.len() == 1 {
            sim.complete(&t);
            t = first_lease(&mut sim, w);
        }
        let mut slices = results(&t);
        slices.last_mut().unwrap().positions += 1;
        let actions = sim.step(Event::TaskCompleted {
            lease: t.lease,
            slices,
        });
        assert!(matches!(
            actions[..],
            [Action::Rejected {
                reason: Rejection::PositionsMismatch { .. },
                ..
            }]
        ));
        assert!(t.slices.iter().all(|k| sim.s.finished(k).is_none()));
        assert_eq!(sim.s.live_leases(), 1);
    }

    #[test]
    fn completion_before_a_successor_is_rejected() {
        let mut sim = Sim::new(Scheduler::new(config()), HashMap::new());
        sim.submit(JobId(1), &KPK);
        let kpk = KPK.materials.last().unwrap();
        let key = kpk.waves.last().unwrap()[0];
        let actions = sim.step(Event::TaskCompleted {
            lease: LeaseId(99),
            slices: vec![result(key)],
        });
        assert!(
            matches!(&actions[..], [Action::Rejected { reason: Rejection::SuccessorNotFinished { key: k, .. }, .. }] if *k == key),
            "{actions:?}"
        );
    }

    #[test]
    fn slice_outside_every_job_is_rejected() {
        let mut sim = Sim::new(Scheduler::new(config()), HashMap::new());
        sim.submit(JobId(1), &KPK);
        let key = SliceKey::pawnless("KRvK".parse().unwrap());
        let other = SliceKey::pawnless("KQvKR".parse().unwrap());
        let actions = sim.step(Event::TaskCompleted {
            lease: LeaseId(1),
            slices: vec![result(other)],
        });
        assert_eq!(
            actions,
            [Action::Rejected {
                lease: LeaseId(1),
                reason: Rejection::UnknownSlice { key: other }
            }]
        );
        let ok = sim.step(Event::TaskCompleted {
            lease: LeaseId(1),
            slices: vec![result(key)],
        });
        assert!(
            matches!(
                ok[..],
                [Action::SliceFinished(_), Action::Accepted { new: 1, .. }]
            ),
            "{ok:?}"
        );
    }

    /// A completion that arrives after its lease expired and the task went to another worker
    /// is accepted (the values are the same), and the other worker's lease is revoked.
    #[test]
    fn late_completion_revokes_the_new_lease() {
        let mut sim = Sim::new(Scheduler::new(config()), HashMap::new());
        sim.submit(JobId(1), &KPK);
        let (a, b) = (sim.register(), sim.register());
        let first = first_lease(&mut sim, a);
        sim.now += TTL;
        let second = first_lease(&mut sim, b);
        let actions = sim.complete(&first);
        assert!(
            actions.contains(&Action::Revoked {
                lease: second.lease,
                worker: b
            }),
            "{actions:?}"
        );
        let again = sim.complete(&second);
        assert_eq!(
            again,
            [Action::Accepted {
                lease: second.lease,
                new: 0,
                duplicates: second.slices.len()
            }]
        );
    }

    #[test]
    fn lost_worker_loses_its_leases_at_once() {
        let mut sim = Sim::new(Scheduler::new(config()), HashMap::new());
        sim.submit(JobId(1), &KPK);
        let (a, b) = (sim.register(), sim.register());
        let t = first_lease(&mut sim, a);
        let actions = sim.step(Event::WorkerLost { worker: a });
        assert_eq!(
            actions,
            [Action::Expired {
                lease: t.lease,
                worker: a
            }]
        );
        assert_eq!(first_lease(&mut sim, b).slices, t.slices);
        assert_eq!(
            sim.step(Event::LeaseRequested { worker: a }),
            [Action::NoTask(NoTask::UnknownWorker)]
        );
    }

    /// A client that leases and never completes gets at most `max_leases_per_worker` tasks;
    /// the ready tasks left go to the other workers.
    #[test]
    fn one_worker_cannot_hoard_the_ready_tasks() {
        let config = Config {
            max_leases_per_worker: 2,
            ..config()
        };
        let mut sim = Sim::new(Scheduler::new(config.clone()), HashMap::new());
        let (greedy, honest) = (sim.register(), sim.register());
        sim.submit(JobId(1), &KPKP);
        let mut held = 0;
        for _ in 0..50 {
            match &sim.step(Event::LeaseRequested { worker: greedy })[..] {
                [Action::Lease(_)] => held += 1,
                [Action::NoTask(NoTask::Waiting)] => {}
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(held, config.max_leases_per_worker);
        assert!(
            matches!(
                &sim.step(Event::LeaseRequested { worker: honest })[..],
                [Action::Lease(_)]
            ),
            "the other worker got nothing"
        );
    }

    #[test]
    fn silent_worker_is_forgotten() {
        let mut sim = Sim::new(Scheduler::new(config()), HashMap::new());
        let (a, b) = (sim.register(), sim.register());
        sim.now += 2 * TTL;
        sim.step(Event::LeaseRequested { worker: b });
        sim.now += TTL;
        assert_eq!(sim.step(Event::Tick), [Action::WorkerForgotten { worker: a }]);
        assert_eq!(sim.s.workers_alive(), 1);
        match &sim.step(Event::Heartbeat {
            worker: a,
            leases: vec![LeaseId(5)],
        })[..]
        {
            [Action::LeaseStatus {
                unknown_worker: true,
                lost,
                ..
            }] => assert_eq!(lost, &[LeaseId(5)]),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn idle_until_a_job_arrives() {
        let mut sim = Sim::new(Scheduler::new(config()), HashMap::new());
        let w = sim.register();
        assert_eq!(
            sim.step(Event::LeaseRequested { worker: w }),
            [Action::NoTask(NoTask::Idle)]
        );
        sim.submit(JobId(1), &KPK);
        first_lease(&mut sim, w);
        // KPvK's pawnless sub-tables are four tasks; the pawn slices wait on them.
        for _ in 0..3 {
            first_lease(&mut sim, w);
        }
        assert_eq!(
            sim.step(Event::LeaseRequested { worker: w }),
            [Action::NoTask(NoTask::Waiting)]
        );
    }

    #[test]
    fn duplicate_job_is_rejected() {
        let mut sim = Sim::new(Scheduler::new(config()), HashMap::new());
        sim.submit(JobId(1), &KPK);
        let actions = sim.submit(JobId(1), &KPKP);
        assert_eq!(
            actions,
            [Action::JobRejected {
                job: JobId(1),
                reason: JobRejection::DuplicateJob { job: JobId(1) }
            }]
        );
    }

    /// A plan that leaves out a material its slices convert into is refused, not left to wait
    /// forever.
    #[test]
    fn plan_without_a_successor_material_is_rejected() {
        let mut partial = KPK.clone();
        partial.materials.retain(|m| m.material.to_string() != "KQvK");
        let mut sim = Sim::new(Scheduler::new(config()), HashMap::new());
        let actions = sim.submit(JobId(1), &partial);
        assert!(
            matches!(&actions[..], [Action::JobRejected { reason: JobRejection::MissingSuccessor { successor, .. }, .. }] if successor.material.to_string() == "KQvK"),
            "{actions:?}"
        );
        assert!(sim.s.job(JobId(1)).is_none());
    }

    #[test]
    fn plan_listing_a_slice_twice_counts_it_once() {
        let mut doubled = KPK.clone();
        let kpk = doubled.materials.last_mut().unwrap();
        let again = kpk.waves[2][1];
        kpk.waves[2].push(again);
        let mut sim = Sim::new(Scheduler::new(config()), HashMap::new());
        sim.submit(JobId(1), &doubled);
        assert_eq!(
            sim.s.job(JobId(1)).unwrap().slices_total as usize,
            plan_slices(&KPK).len()
        );
        sim.drain();
        sim.assert_all_done();
    }

    /// A second job that shares slices with a running one solves only the slices it adds.
    #[test]
    fn shared_slices_are_solved_once() {
        let mut sim = Sim::new(Scheduler::new(config()), HashMap::new());
        sim.submit(JobId(1), &KPK);
        let w = sim.register();
        let t = first_lease(&mut sim, w);
        sim.complete(&t);
        match sim.submit(JobId(2), &KPKP)[..] {
            [Action::JobAccepted { finished, .. }] => assert_eq!(finished as usize, t.slices.len()),
            ref other => panic!("{other:?}"),
        }
        sim.drain();
        sim.assert_all_done();
    }

    /// Resuming from a journal's finished slices leases only what is left, and finishes.
    #[test]
    fn resume_leases_only_unfinished_slices() {
        let mut sim = Sim::new(Scheduler::new(config()), HashMap::new());
        sim.submit(JobId(1), &KPKP);
        let w = sim.register();
        for _ in 0..40 {
            let t = first_lease(&mut sim, w);
            sim.complete(&t);
        }
        // A lease in flight when the coordinator died.
        let in_flight = first_lease(&mut sim, w);
        let journal: Vec<SliceResult> = sim.finished.keys().map(|&k| result(k)).collect();
        let before = journal.len();

        let s = Scheduler::resume(
            Config {
                first_id: 1_000_000,
                ..config()
            },
            journal,
        )
        .unwrap();
        let mut resumed = Sim::new(s, sim.finished.clone());
        match resumed.submit(JobId(1), &KPKP)[..] {
            [Action::JobAccepted { finished, .. }] => assert_eq!(finished as usize, before),
            ref other => panic!("{other:?}"),
        }
        // The worker of the previous life completes its lease: accepted, slice by slice.
        let actions = resumed.complete(&in_flight);
        assert!(actions.contains(&Action::Accepted {
            lease: in_flight.lease,
            new: in_flight.slices.len(),
            duplicates: 0
        }));
        resumed.drain();
        resumed.assert_all_done();
        assert_eq!(resumed.finished.len(), plan_slices(&KPKP).len());
    }

    #[test]
    fn job_of_finished_slices_is_done_at_once() {
        let journal: Vec<SliceResult> = plan_slices(&KPK).into_iter().map(result).collect();
        let s = Scheduler::resume(config(), journal.clone()).unwrap();
        let mut sim = Sim::new(s, journal.iter().map(|r| (r.key, r.hash)).collect());
        let actions = sim.submit(JobId(7), &KPK);
        assert_eq!(actions[1..], [Action::JobDone { job: JobId(7) }]);
        let w = sim.register();
        assert_eq!(
            sim.step(Event::LeaseRequested { worker: w }),
            [Action::NoTask(NoTask::Idle)]
        );
    }

    #[test]
    fn resume_refuses_conflicting_records() {
        let key = SliceKey::pawnless("KQvK".parse().unwrap());
        let a = result(key);
        let b = SliceResult { hash: [0; 32], ..a };
        assert!(Scheduler::resume(config(), [a, a]).is_ok());
        assert_eq!(
            Scheduler::resume(config(), [a, b]).unwrap_err(),
            ResumeConflict { key }
        );
    }

    /// Slices adopted before a job (a complete table on disk) are not leased, and the job is
    /// done at once; adopting a slice that a job planned and did not finish is a conflict.
    #[test]
    fn adopted_slices_are_not_leased_and_a_planned_unfinished_slice_is_not_adopted() {
        let kqk = SliceKey::pawnless("KQvK".parse().unwrap());
        let mut s = Scheduler::new(config());
        s.adopt([result(kqk)]).unwrap();
        let actions = s.handle(
            0,
            Event::JobSubmitted {
                job: JobId(1),
                plan: plan(&["KQvK".parse().unwrap()]),
            },
        );
        assert!(
            actions.contains(&Action::JobDone { job: JobId(1) }),
            "{actions:?}"
        );
        let krk = SliceKey::pawnless("KRvK".parse().unwrap());
        s.handle(
            1,
            Event::JobSubmitted {
                job: JobId(2),
                plan: plan(&["KRvK".parse().unwrap()]),
            },
        );
        assert_eq!(s.adopt([result(krk)]).unwrap_err(), ResumeConflict { key: krk });
        assert_eq!(s.finished(&krk), None);
        assert_eq!(s.finished(&kqk), Some(result(kqk).hash));
    }

    #[test]
    fn finished_count_that_disagrees_with_the_index_rejects_the_job() {
        let key = SliceKey::pawnless("KQvK".parse().unwrap());
        let wrong = SliceResult {
            positions: 5,
            ..result(key)
        };
        let mut s = Scheduler::resume(config(), [wrong]).unwrap();
        let actions = s.handle(
            0,
            Event::JobSubmitted {
                job: JobId(1),
                plan: KPK.clone(),
            },
        );
        assert!(
            matches!(
                actions[..],
                [Action::JobRejected {
                    reason: JobRejection::FinishedCountMismatch { recorded: 5, .. },
                    ..
                }]
            ),
            "{actions:?}"
        );
    }

    /// KRvKN's slice, the largest of its plan, goes to a group of three workers (the others
    /// whole): part 0 to the worker that leases it, parts 1 and 2 to the next two that ask,
    /// before anything else. A part that falls silent fails the group: all three leases expire
    /// at once and the slice is leased again, in as many parts as there are workers left; the
    /// helpers complete with no slice, the leader with the slice, and the job is done.
    #[test]
    fn a_large_slice_goes_to_a_group_and_a_silent_part_fails_the_group() {
        let krkn = SliceKey::pawnless("KRvKN".parse().unwrap());
        let size = SliceIndexer::new(krkn).size();
        let mut sim = Sim::new(Scheduler::new(config_in_parts(size)), HashMap::new());
        sim.submit(JobId(1), &KRKN);
        let workers: Vec<WorkerId> = (0..3).map(|_| sim.register()).collect();
        // The sub-tables, whole, by the first worker.
        let leader = loop {
            let t = first_lease(&mut sim, workers[0]);
            if t.slices == [krkn] {
                break t;
            }
            assert_eq!(t.part, None, "{:?}", t.slices);
            sim.complete(&t);
        };
        let group = leader.lease;
        assert_eq!(
            leader.part,
            Some(PartOf {
                group,
                parts: 3,
                index: 0
            })
        );
        // The leader asks again: nothing (it holds part 0 of the only task).
        let again = sim.step(Event::LeaseRequested { worker: workers[0] });
        assert!(
            matches!(again[..], [Action::NoTask(NoTask::Waiting)]),
            "{again:?}"
        );
        let helpers: Vec<LeasedTask> = [1, 2].map(|w| first_lease(&mut sim, workers[w])).to_vec();
        for (i, h) in helpers.iter().enumerate() {
            assert_eq!(h.slices, [krkn]);
            assert_eq!(h.successors, leader.successors);
            assert_eq!(
                h.part,
                Some(PartOf {
                    group,
                    parts: 3,
                    index: i as u32 + 1
                })
            );
            assert_eq!(
                sim.s.part_of(h.lease).map(|(p, w)| (p.index, w)),
                Some((i as u32 + 1, workers[i + 1]))
            );
        }
        // Workers 0 and 2 heartbeat, worker 1 is silent: its part expires and the group with it.
        sim.now += TTL / 2;
        for w in [0, 2] {
            let leases = vec![if w == 0 { leader.lease } else { helpers[1].lease }];
            sim.step(Event::Heartbeat {
                worker: workers[w],
                leases,
            });
        }
        sim.now += TTL / 2 + 1;
        let actions = sim.step(Event::Tick);
        let mut expired: Vec<LeaseId> = actions
            .iter()
            .filter_map(|a| match a {
                Action::Expired { lease, .. } => Some(*lease),
                _ => None,
            })
            .collect();
        expired.sort();
        let mut all = vec![leader.lease, helpers[0].lease, helpers[1].lease];
        all.sort();
        assert_eq!(expired, all, "{actions:?}");
        assert!(!sim.s.group_alive(group));
        assert_eq!(sim.s.live_leases(), 0);
        // Worker 1 is forgotten; two workers left: the slice in two parts.
        sim.now += 3 * TTL;
        for w in [0, 2] {
            sim.step(Event::Heartbeat {
                worker: workers[w],
                leases: vec![],
            });
        }
        sim.step(Event::Tick);
        let leader = first_lease(&mut sim, workers[2]);
        assert_eq!(leader.part.map(|p| (p.parts, p.index)), Some((2, 0)));
        let helper = first_lease(&mut sim, workers[0]);
        assert_eq!(helper.part.map(|p| (p.group, p.index)), Some((leader.lease, 1)));
        // A helper may not report the slice; it completes with nothing.
        let refused = sim.step(Event::TaskCompleted {
            lease: helper.lease,
            slices: results(&helper),
        });
        assert!(
            matches!(
                refused[..],
                [Action::Rejected {
                    reason: Rejection::NotTheTask { .. },
                    ..
                }]
            ),
            "{refused:?}"
        );
        sim.complete(&helper);
        assert!(
            sim.s.group_alive(leader.lease),
            "the group lives until its leader completes"
        );
        let done = sim.complete(&leader);
        assert!(
            done.iter().any(|a| matches!(a, Action::JobDone { .. })),
            "{done:?}"
        );
        assert!(!sim.s.group_alive(leader.lease));
        sim.assert_all_done();
    }
}
