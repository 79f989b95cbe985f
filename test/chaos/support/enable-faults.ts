// Import first in a spec that drives fault points in-process: lib/runtime/fault-points.ts
// reads GEN_DURABLE_FAULTS once, when it loads, so the variable must be set before any
// lib module is required (imports compile to requires in order).
process.env['GEN_DURABLE_FAULTS'] ??= '1';
