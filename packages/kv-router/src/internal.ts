// For sibling packages' tests: the RoutingTable conformance suite (imports vitest).
export { cleared, hashOf, removed, routingTableConformance, stored, type ConformanceTable } from './testing/conformance.js';
export { MinHeap } from './min-heap.js';
