// Package ringlayout is the layout of the in-process ring (package ring):
// what asmgen's writers, compiled into the program, and the tracer's side
// in package ring both read and write. It is part of the instrumenter,
// as the tracer's side is not: a change to the tracer alone leaves the
// wrapper's identity, and so every instrumented build, as it was.
//
// The buffer is one zero-filled (BSS) symbol, Symbol, that every
// instrumented package's assembly declares (DUPOK, so the linker keeps
// one): a program that is never traced this way touches none of its pages.
// Its layout, little-endian words:
//
//	OnAt       1 while a tracer records; the trampolines write only then.
//	           Preparing from the tracer's Open to its Enable.
//	           2 while a writer turns the probes off for a dead tracer.
//	           Stopping once the tracer's Stop has turned its probes
//	           off and sets its own byte (StoppingAt), which no
//	           writer's compare-and-swap from 1 succeeds against.
//	UntilAt    the tracer's lease, a time of ClockAt's clock
//	           (runtime.nanotime's CLOCK_MONOTONIC unless Ticks): a writer that fires after it turns every probe in
//	           the list off and sets OnAt to 0 (see asmgen's record).
//	SlotsAt    how many Ps have a buffer, at most MaxSlots
//	SizeAt     the bytes of each P's buffer, a power of two
//	NoSlotAt   events dropped because their P has no buffer
//	ListLenAt  how many semaphores the list holds
//	ModeAt     Events, or Counts: then a writer writes no record but
//	           counts the call, in its P's counters, as -stats prints them
//	TableMaskAt, CountersAt, CountersSizeAt
//	           with Counts: the sites' table, at DataAt, has TableMaskAt+1
//	           entries of two words, the site's address (0: a free entry)
//	           and its first counter times two, plus one for a site that
//	           adds its elapsed time (the first word) to a total and a
//	           histogram (1 + HistBuckets counters) rather than counting
//	           one; a site's entry is the first free or matching one from
//	           its address / 8, masked. Each P's counters, CountersSizeAt
//	           bytes, follow at CountersAt.
//	ClockAt    Monotonic, or Ticks: then the writers time calls by the
//	           CPU's time-stamp counter, a third of runtime.nanotime's
//	           cost where the clock is a VM's kvm-clock. A time read
//	           that way is the counter with TicksTag set, so that code
//	           that meets one where it expects the other (a call that
//	           began before the tracer changed the clock) tells them
//	           apart; UntilAt is in the clock's unit.
//	TickNsAt   with Ticks: the nanoseconds of 1<<32 ticks, by which an
//	           exit probe turns ticks into its elapsed ns. Only ever
//	           overwritten by the next calibration, never cleared: a call
//	           that began in ticks ends in ticks.
//	PlansAt    with Events, 1 when the table at DataAt maps sites to
//	           their value reads (package values' Plan): an entry's
//	           second word is the reads' offset from the ring in its low
//	           32 bits and the bytes of the value area they fill above.
//	           The reads, OpSize bytes each and ended by one of From 0,
//	           follow the table, below BatchAt, where each P has
//	           BatchSize bytes for the iovecs of its reads (see OpFlush),
//	           and from ScratchAt AreaMax bytes to fill the area in.
//	SamplingAt 1 when the writers sample calls (-sample in the program,
//	           with Events and plans): each root call, a call of a
//	           goroutine with no traced call open, is sampled at
//	           SampleAt's rate or by its incoming trace context's flag,
//	           and the calls under it follow it; a call not sampled
//	           writes no record, or with CompactAt one compact record at
//	           its exit (CompactBit). Each site's table entry carries its
//	           role above PlanFlagsShift; each goroutine's open calls are
//	           counted at GoTableAt.
//	BlockAt    0, or how long a writer that finds its P's buffer full
//	           waits for the tracer to make room (-block), in the
//	           clock's unit. It yields its thread meanwhile (no other
//	           goroutine runs on its P, and a stop of the world waits
//	           for it), and drops the event when the time is up, when
//	           the ring goes off, or at once when the tracer has read
//	           nothing since this P last waited in vain (GaveUpAt): a
//	           stopped tracer costs each P one wait, not one an event.
//	HeadersAt  per P, HeaderSize bytes: the head (bytes written, only
//	           ever growing), the count of events dropped on a full
//	           buffer, that count as the P's last record saw it, at
//	           TailAt, the bytes the tracer has read, at GaveUpAt,
//	           one more than the tail when the P's last wait ran out,
//	           at RandAt the P's random numbers' state (xorshift64) for
//	           sampling, and at LeftCallerAt the calls sampling left
//	           out by their callers' choice
//	ListAt     the semaphores the tracer turned on, a word each: the
//	           address in the low 48 bits (ListAddr) and ListNarrow,
//	           ListRaised and ListClaimed above
//	DataAt     with Counts, the table and the counters; with Events,
//	           the table, the reads and the scratch areas
//	BuffersAt  with Events, the Ps' buffers, back to back
//	GoTableAt  GoSlots slots of two words, one for each goroutine whose
//	           id is the slot's number modulo GoSlots: the id with the
//	           session's EpochAt above GoEpochShift (a slot of another
//	           goroutine or session is empty), and the count of its
//	           traced calls open (low 32 bits) with GoSampledBit set
//	           when their root was sampled, and GoCallerBit when its
//	           incoming trace context's flag chose
//
// A record is RecordWords words, then its arguments: the site's address
// (a usdtgen probe's semaphore's, see ProviderMagic) with the count of words and which of them are strings, the goroutine
// id, the time (runtime.nanotime), the thread's id (with AfterLossBit
// set on the P's first record after it dropped events, and
// CallerTimeBit where the trampoline gave the time), then the words the trampoline was
// passed after the site index, then, for each word that points to a C
// string, a word of its length and its bytes in whole words, then for a
// site with value reads the value area they filled, as many bytes as the
// table says. A record may wrap around its buffer's end.
package ringlayout

import "github.com/go-usdt/usdt/internal/valueop"

const (
	Symbol = "usdt/ring.ctl"
	// Where is a symbol of two words, WhereMagic and the ring's address,
	// by which a tracer finds the ring, in an executable stripped of its
	// symbols too, and knows its layout. The writer reaches the ring
	// through it, which keeps it linked.
	Where = "usdt/ring.where"
	// WhereMagic ends with the layout's version: "\x7fUSDTrn5", since a
	// writer samples calls (SamplingAt); "rn4", since a writer waits for
	// room (BlockAt); "rn3", since an automatic probe's
	// semaphore is the low half of a 32-bit slot whose high half is the
	// tracer's flag (ListNarrow). A tracer writes no
	// ring of another version: its writer reads the plans, fills the
	// areas and takes the probes down otherwise.
	WhereMagic = 0x356e72544453557f
	// Writer is the code the trampolines call to write to the ring.
	Writer = "usdt/ring.record"
	// Since is the code a fire function calls for the time elapsed since
	// a call's start, which a ring trace that counts by the time-stamp
	// counter had read in ticks (TicksTag).
	Since = "usdt/ring.since"
	// Now is the code a fire function calls for a call's start: the
	// time-stamp counter's ticks (TicksTag) while ClockAt is Ticks, else
	// runtime.nanotime. A fire function times the calls whose arguments
	// it copies, and kvm-clock's nanotime costs 2.5 times the counter.
	Now = "usdt/ring.now"
	// Bucket is the code a counting writer calls to add one to a timed
	// site's bucket, by a branch for each bit of the bucket's number:
	// an address computed from the clock would hold every later load
	// until the clock is read, and the branches are predicted.
	Bucket = "usdt/ring.bucket"
	// ProviderMagic starts the list each package whose usdtgen probes
	// write to the ring keeps in its read-only data: the magic, the
	// count of probes, and each one's semaphore, whose address is the
	// site the probe's records name (see ProviderSemaphores).
	ProviderMagic = 0x647670544453557f // "\x7fUSDTpvd"

	OnAt      = 0
	UntilAt   = 8
	SlotsAt   = 16
	SizeAt    = 24
	NoSlotAt  = 32
	ListLenAt = 40
	ModeAt    = 48
	// With Counts.
	TableMaskAt    = 56
	CountersAt     = 64
	CountersSizeAt = 72
	ClockAt        = 80
	TickNsAt       = 88
	// With Counts and Ticks, EntryTicksAt is 1 when the tracer counts
	// every call of a function with an exit probe at the exit: the
	// entry's trampoline then reads the ticks it returns as the start,
	// without calling the writer.
	EntryTicksAt = 112
	// OwnerAt is the token of the tracer whose session the ring is: a
	// tracer that stopped past its lease, whose ring another took over
	// (see Open), neither renews nor stops the other's.
	OwnerAt = 120
	// With Events.
	PlansAt = 96
	// PidAt is the process's id, by which a writer reads every source
	// it does not hold (OpHeld) through process_vm_readv, which fails
	// where a load would fault.
	PidAt = 104
	// BlockAt bounds a writer's wait for room (-block), in the clock's
	// unit; 0 drops at once.
	BlockAt = 128
	// SamplingAt is 1 while the writers sample calls; SampleAt is the
	// share of root calls sampled, as a threshold that a P's next
	// random number must be below; CompactAt is 1 when a call not
	// sampled writes a compact record at its exit. EpochAt is the
	// session's number above GoEpochShift, which the goroutines' slots
	// of an earlier session lack.
	SamplingAt = 136
	SampleAt   = 144
	CompactAt  = 152
	EpochAt    = 160
	// CountLeftAt is 1 when a call that sampling left out is counted
	// instead, as Counts counts (the table at CountTableAt, an offset
	// from the ring, with CountMaskAt; the counters at CountersAt, a
	// timed site's with its errors after its buckets where its role
	// names an error result): CompactAt's records are for a ring that
	// has no room for the counters.
	CountLeftAt  = 168
	CountTableAt = 176
	CountMaskAt  = 184

	HeadersAt  = 4096
	HeaderSize = 64
	HeadAt     = 0
	LostAt     = 8
	LostSeenAt = 16
	TailAt     = 32
	GaveUpAt   = 40
	RandAt     = 48
	// LeftCallerAt counts the calls that sampling left out because
	// their root's incoming trace context was not sampled.
	LeftCallerAt = 24
	MaxSlots     = 256

	ListAt  = HeadersAt + MaxSlots*HeaderSize
	MaxList = 1 << 18
	DataAt  = ListAt + 8*MaxList
	// PlanRoom is the room of the value reads' table, the reads and
	// the scratch areas: Caddy with every function probed (120,408
	// probes) needs 8.4 MB of reads.
	PlanRoom  = 32 << 20
	ScratchAt = DataAt + PlanRoom - MaxSlots*AreaMax
	BatchAt   = ScratchAt - MaxSlots*BatchSize
	// BatchSize is a P's room for the reads it hands process_vm_readv
	// at once: MaxOps iovecs for the area, MaxOps for the process, from
	// BatchRemote, and from BatchOps the address of each one's op.
	BatchSize   = 2048
	BatchRemote = 16 * valueop.MaxOps
	BatchOps    = 2 * BatchRemote
	BuffersAt   = DataAt + PlanRoom
	// DataMax is the room for every P's buffer, or for the counters:
	// enough for 32M a P on machines of up to 8 CPUs, which holds a
	// burst of 40,000 events with large Go values (bbolt's Puts with
	// their *Bucket, 23 MB) while the reader decodes at its own pace.
	DataMax = 256 << 20
	// GoTableAt is the goroutines' slots for sampling, GoSlots of
	// GoSlotSize bytes: goroutine ids are handed out in order, so the
	// goroutines alive at once rarely share one.
	GoTableAt    = BuffersAt + DataMax
	GoSlots      = 1 << 18
	GoSlotSize   = 16
	GoEpochShift = 48
	GoSampledBit = 63
	GoCallerBit  = 62
	Size         = GoTableAt + GoSlots*GoSlotSize

	// A site's entry in the table of plans carries, while the writers
	// sample, its role from PlanFlagsShift on: FlagEntry for the entry
	// of a function whose exit is traced too, FlagExit for that exit,
	// neither for any other probe (which follows the goroutine's open
	// root, or is sampled on its own); one more than the word that is
	// the exit's last result, an error, through a pointer to it (4
	// bits at FlagErrorShift, 0 for none); and one more than the word
	// that is the entry's incoming W3C traceparent, a C string (4 bits
	// at FlagContextShift).
	PlanFlagsShift   = 48
	FlagEntry        = 1
	FlagExit         = 2
	FlagErrorShift   = 2
	FlagContextShift = 6
	// FlagKnown is set in every site's role: a site the table lacks is
	// recorded whatever the sampling.
	FlagKnown = 1 << 10
	// PlanAreaMask is the entry's bits above 32 that are the value
	// area's bytes.
	PlanAreaMask = 1<<16 - 1

	// On values.
	Recording = 1
	Expiring  = 2
	// Stopping is OnAt once the tracer's Stop, its probes taken down,
	// has set its byte at StoppingAt: a writer's compare-and-swap from
	// Recording fails against it, so the word read back tells the
	// tracer whether a writer began to take the probes down first. A
	// tracer killed then leaves the ring so, with nothing on: the next
	// one opens it once the lease has run out.
	Stopping   = 0x101
	StoppingAt = OnAt + 1
	// Preparing is OnAt from Open until Enable: the tracer writes the
	// ring's mode, its plans or counters, and switches its clock (and
	// the lease's) to the time-stamp counter, while no writer runs
	// record, whose lease check would read one clock against the
	// other's time. A tracer killed then leaves nothing on: the next
	// one opens the ring once the lease has run out.
	Preparing = 3

	// A list entry's address, and what the tracer did to its semaphore.
	// Without ListNarrow the address is the low half of a 32-bit slot (an
	// automatic probe's) whose high half the tracer set to 1: the tracer's
	// Stop and the writer that finds the lease run out both store 0 there,
	// in any order, any number of times, and neither touches the low
	// half, which the kernel counts uprobes in. With ListNarrow it is a
	// 16-bit semaphore (usdtgen's) that the tracer added one to, which
	// exactly one side must take back: ListRaised says the one was added
	// (the tracer sets it in the same system call as the semaphore), and
	// the writer takes it back only by a compare-and-swap that clears
	// ListRaised from an entry without ListClaimed, the byte the tracer's
	// Stop writes before it takes back those still raised itself.
	ListAddr    = 1<<48 - 1
	ListNarrow  = 1 << 48
	ListRaised  = 1 << 49
	ListClaimed = 1 << 56

	// Modes.
	Events = 0
	Counts = 1

	// Clocks.
	Monotonic = 0
	Ticks     = 1
	TicksTag  = 1 << 63
	// HistBuckets are a timed site's buckets after its total: bucket b
	// counts the elapsed times e with bits.Len64(e) == b, the last all
	// longer ones.
	HistBuckets = 64

	// A value read (values.Op): From u8, Arg u8 (the note's argument,
	// the goroutine id's 0), Src u16, Dst u16, Max u16, Elem u16, Guess
	// u8, Held u8, Flush u8. A writer copies a held read with plain
	// loads and reads every other through process_vm_readv, which fails
	// where a load would fault; it sets the read's bit in the area's
	// status word (values.StatusSize) when the read failed: fewer bytes
	// than asked, or for a guess none. It may gather reads and hand them
	// to one process_vm_readv, which stops at the first that faults; a
	// read marked Flush takes its source from the bytes of a read
	// gathered since the last Flush, so those are read first.
	OpSize  = 16
	OpFrom  = 0
	OpArg   = 1
	OpSrc   = 2
	OpDst   = 4
	OpMax   = 6
	OpElem  = 8
	OpGuess = 10
	OpHeld  = 11
	OpFlush = 12
	AreaMax = valueop.AreaSize

	RecordWords = 4
	// A record's first word holds the site's address in its low 48
	// bits, the count of words at CountShift (4 bits), and at
	// StringsShift a bit per word that points to a C string, whose
	// length and bytes follow the words.
	CountShift   = 48
	StringsShift = 52
	// AfterLossBit, in a record's thread word, says that its P dropped
	// events since its last record.
	AfterLossBit = 63
	// CallerTimeBit, in a record's thread word, says that its time is
	// the one the trampoline read to time the call (an exit's end), so
	// that the time less the first word (its elapsed ns) is the start
	// the program read; else the writer read the clock itself, later.
	CallerTimeBit = 62
	// CompactBit, in a record's thread word, says that the record is
	// a compact one, of a call sampling left out (CompactAt): one word,
	// the site's first word (an exit's elapsed ns) with CompactCaller
	// set when the root's incoming trace context left it out,
	// CompactError when the site's last result is an error and
	// CompactFailed when that error is not nil; no value area.
	CompactBit    = 61
	CompactCaller = 61
	CompactError  = 62
	CompactFailed = 63
)
