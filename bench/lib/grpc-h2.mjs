// A lean gRPC unary client for load generation: one HTTP/2 session, pre-encoded request frames,
// no per-call protobuf work beyond decoding the status. grpc-js's client costs far more CPU per
// call than the servers under test, so with it the load generator, not the server, is measured.
import http2 from 'node:http2';
import protobuf from 'protobufjs';
import { fileURLToPath } from 'node:url';

const PROTO_DIR = fileURLToPath(new URL('../../proto/', import.meta.url));

let root;
function messages() {
  if (!root) {
    root = new protobuf.Root();
    root.resolvePath = (_origin, target) => PROTO_DIR + target.replace(/^.*\//, '');
    root.loadSync('grpc_service.proto', { keepCase: true });
  }
  return { Request: root.lookupType('inference.ModelInferRequest'), Response: root.lookupType('inference.ModelInferResponse') };
}

/** gRPC length-prefixed frame of an encoded ModelInferRequest. */
export function encodeInferFrame(request) {
  const { Request } = messages();
  const body = Request.encode(Request.fromObject(request)).finish();
  const frame = Buffer.alloc(5 + body.length);
  frame.writeUInt32BE(body.length, 1);
  Buffer.from(body).copy(frame, 5);
  return frame;
}

export function decodeInferResponse(frame) {
  return messages().Response.decode(frame.subarray(5));
}

export function h2GrpcClient(port) {
  const session = http2.connect(`http://127.0.0.1:${port}`);
  session.on('error', () => {});
  return {
    /** Resolves with the response frame; rejects on a non-OK grpc-status. */
    call(path, frame) {
      return new Promise((resolve, reject) => {
        const stream = session.request({ ':method': 'POST', ':path': path, 'content-type': 'application/grpc', te: 'trailers' });
        const chunks = [];
        stream.on('data', (c) => chunks.push(c));
        stream.on('trailers', (t) => {
          const status = Number(t['grpc-status']);
          if (status !== 0) reject(new Error(`grpc-status ${status}: ${decodeURIComponent(t['grpc-message'] ?? '')}`));
        });
        stream.on('end', () => resolve(Buffer.concat(chunks)));
        stream.on('error', reject);
        stream.end(frame);
      });
    },
    close: () => session.close(),
  };
}

/**
 * Calls over long-lived gRPC streams (ModelStreamInfer), one request in flight per stream: a call
 * takes an idle stream (or opens one), writes its frame and resolves with the next response frame
 * (its 5-byte prefix included). So a closed loop of C callers holds C streams, as C clients of
 * tritonclient's `start_stream` would. A response whose error_message (field 1, first when
 * present) is not empty rejects its call, as does a stream that ends or fails.
 */
export function h2GrpcStreams(port, path = '/inference.GRPCInferenceService/ModelStreamInfer') {
  const session = http2.connect(`http://127.0.0.1:${port}`);
  session.on('error', () => {});
  const idle = [];
  const open = () => {
    const stream = session.request({ ':method': 'POST', ':path': path, 'content-type': 'application/grpc', te: 'trailers' });
    const s = { stream, pending: undefined, buf: Buffer.alloc(0) };
    const fail = (e) => {
      const p = s.pending;
      s.pending = undefined;
      p?.reject(e);
    };
    stream.on('data', (d) => {
      s.buf = s.buf.length === 0 ? d : Buffer.concat([s.buf, d]);
      while (s.buf.length >= 5) {
        const len = s.buf.readUInt32BE(1);
        if (s.buf.length < 5 + len) break;
        const frame = s.buf.subarray(0, 5 + len);
        s.buf = s.buf.subarray(5 + len);
        const p = s.pending;
        s.pending = undefined;
        idle.push(s);
        if (frame[5] === 0x0a && frame[6] !== 0) p?.reject(new Error(`error_message: ${frame.subarray(7, 7 + frame[6]).toString()}`));
        else p?.resolve(frame);
      }
    });
    stream.on('trailers', (t) => fail(new Error(`stream ended: grpc-status ${t['grpc-status']} ${decodeURIComponent(t['grpc-message'] ?? '')}`)));
    stream.on('error', fail);
    stream.on('close', () => {
      const i = idle.indexOf(s);
      if (i !== -1) idle.splice(i, 1);
      fail(new Error('stream closed'));
    });
    return s;
  };
  return {
    call(frame) {
      const s = idle.pop() ?? open();
      return new Promise((resolve, reject) => {
        s.pending = { resolve, reject };
        s.stream.write(frame);
      });
    },
    close: () => {
      for (const s of idle) s.stream.end();
      session.close();
    },
  };
}
