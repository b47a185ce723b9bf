// PostgreSQL's process array, across the supported server versions (15, 17, 18).
//
// 17 renamed backend ids to proc numbers (storage/procnumber.h replaces storage/backendid.h,
// MyProcNumber is 0-based where MyBackendId was 1-based), dropped PGPROC.pgprocno and moved a
// backend's local transaction id into PGPROC.vxid; 18 replaced ProcGlobal->walwriterLatch by
// the WAL writer's proc number.  aq keeps every difference here: the capability code asks for
// a proc number, a latch or a slot, never for a field.
#pragma once

extern "C" {
#include "postgres.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "storage/proc.h"
#if PG_VERSION_NUM >= 170000
#include "storage/procnumber.h"
#else
#include "storage/backendid.h"
#endif
}

namespace aq::compat {

// The index of proc in ProcGlobal->allProcs.
inline uint32 proc_number(const PGPROC* proc) {
#if PG_VERSION_NUM >= 170000
    return uint32(GetNumberFromPGProc(proc));
#else
    return uint32(proc->pgprocno);
#endif
}

inline uint32 my_proc_number() { return proc_number(MyProc); }

inline Latch* proc_latch(uint32 proc_number) { return &ProcGlobal->allProcs[proc_number].procLatch; }

inline int proc_pid(uint32 proc_number) { return ProcGlobal->allProcs[proc_number].pid; }

// This backend's current local transaction id (InvalidLocalTransactionId between transactions).
inline LocalTransactionId my_local_xid() {
#if PG_VERSION_NUM >= 170000
    return MyProc->vxid.lxid;
#else
    return MyProc->lxid;
#endif
}

// A slot of this backend in an array of MaxBackends entries (0-based), or -1 for a process
// that has none (an auxiliary process, or before it has a PGPROC).
inline int my_backend_slot() {
#if PG_VERSION_NUM >= 170000
    return MyProcNumber != INVALID_PROC_NUMBER && MyProcNumber < MaxBackends ? int(MyProcNumber) : -1;
#else
    return MyBackendId != InvalidBackendId && MyBackendId <= MaxBackends ? MyBackendId - 1 : -1;
#endif
}

// The WAL writer's latch, or nullptr while it is not running.
inline Latch* wal_writer_latch() {
#if PG_VERSION_NUM >= 180000
    ProcNumber writer = ProcGlobal->walwriterProc;
    return writer != INVALID_PROC_NUMBER ? &GetPGProcByNumber(writer)->procLatch : nullptr;
#else
    return ProcGlobal->walwriterLatch;
#endif
}

}  // namespace aq::compat
