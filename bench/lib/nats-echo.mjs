// A bare NATS replier for the cluster-hop bench's transport floor: answers every message on the
// subject it is given with the message's own bytes. Started as its own process, so a request/reply
// with it crosses the same process boundaries as the router's hop to a worker (bench process → NATS
// server → this process → NATS server → bench process), with nothing of ours in between.
//
//   node bench/lib/nats-echo.mjs NATS_URL SUBJECT      (prints "ready" once subscribed)
import { connect } from '@nats-io/transport-node';

const [url, subject] = process.argv.slice(2);
const nc = await connect({ servers: url });
const sub = nc.subscribe(subject);
await nc.flush();
process.stdout.write('ready\n');
process.on('SIGTERM', () => void nc.close().finally(() => process.exit(0)));
for await (const m of sub) m.respond(m.data);
