// What the bench's server children (bare-servers.mjs, minimal-servers.mjs) share: a grpc-js server
// offering KServe's ModelInfer from the repository's own protos, and the start-up line the bench
// reads ({"http":port,"grpc":port} on stdout once both listen on ephemeral loopback ports).
import grpc from '@grpc/grpc-js';
import protoLoader from '@grpc/proto-loader';
import { fileURLToPath } from 'node:url';

const PROTO_DIR = fileURLToPath(new URL('../../proto/', import.meta.url));

/** A grpc-js server with no message size limits, answering ModelInfer with `modelInfer(call, callback)`. */
export function modelInferServer(modelInfer) {
  const def = protoLoader.loadSync('grpc_service.proto', { includeDirs: [PROTO_DIR], keepCase: true, longs: Number, enums: String, defaults: true, oneofs: true });
  const pkg = grpc.loadPackageDefinition(def);
  const server = new grpc.Server({ 'grpc.max_receive_message_length': -1, 'grpc.max_send_message_length': -1 });
  server.addService(pkg.inference.GRPCInferenceService.service, { ModelInfer: modelInfer });
  return server;
}

/** Listens with both (ephemeral loopback ports), prints the ports line, and exits on SIGTERM. */
export function listenAndAnnounce(httpServer, grpcServer) {
  httpServer.listen(0, '127.0.0.1', () => {
    grpcServer.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, grpcPort) => {
      if (err) throw err;
      process.stdout.write(JSON.stringify({ http: httpServer.address().port, grpc: grpcPort }) + '\n');
    });
  });
  process.on('SIGTERM', () => process.exit(0));
}
