// What the minimal routers (minimal-router.mjs, minimal-llm-router.mjs) share to talk to a worker as the
// router does by default: a call-home listener (the runtime's CallHomeListener) that takes the frames the
// worker streams back, and sends requests down the connection of the worker that announced an instance
// of `endpointSubject`. `home` is undefined when call-home is off: everything then goes over NATS.
import { CallHomeListener } from '@switchyard/runtime';

/**
 * `deliver(token, message)` gets each frame that comes home (heartbeats are left out). Returns the
 * envelope's `callHome` (`target`), `send(reply, message)` (true when the request went down a
 * connection; false: publish it on NATS) and `close`.
 */
export async function minimalCallHome(callHome, endpointSubject, deliver) {
  if (!callHome) return { target: undefined, send: () => false, close: async () => {} };
  // the connection of a worker that announced an instance of this endpoint, and that instance's subject
  let down;
  const home = await CallHomeListener.listen({
    onFrame: (token, message) => message !== null && deliver(token, message),
    onClose: (conn) => {
      if (down?.conn === conn) down = undefined;
    },
    onSubjects: (conn, subjects, serving) => {
      for (const s of subjects) {
        if (serving && s.startsWith(`${endpointSubject}.`)) down = { conn, subject: s };
        else if (!serving && down?.subject === s) down = undefined;
      }
    },
  });
  return {
    target: { address: home.address, key: home.key },
    send: (reply, message) => down !== undefined && down.conn.request(reply, down.subject, message),
    close: () => home.close(),
  };
}
