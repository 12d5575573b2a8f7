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
