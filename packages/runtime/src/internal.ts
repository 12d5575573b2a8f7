// For sibling packages (the coming etcd / NATS implementations) and tests; not a public API.
export { subjectMatches } from './addressing.js';
export { AsyncChannel } from './async-channel.js';
export { WatchState } from './watch-state.js';
export { type IdleEntry, IdleSweep } from './idle-sweep.js';
