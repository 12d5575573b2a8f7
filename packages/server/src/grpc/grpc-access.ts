/**
 * `--grpc-restricted-protocol` on the gRPC door: one server interceptor that checks every call's
 * metadata against its method's group (`access-control.ts`) before the handler sees the call. A
 * refused call ends with Triton's status (UNAVAILABLE, `This protocol is restricted, expecting
 * header '<key>'`) and its messages are never read: no handler runs, unary or streaming.
 */
import { Metadata, ServerInterceptingCall, type ServerInterceptor } from '@grpc/grpc-js';
import { type Restrictions, checkGrpcRestriction, grpcMethodGroup } from '../access-control.js';
import { toGrpcError } from './grpc-status.js';

export function restrictedProtocolInterceptor(restrictions: Restrictions): ServerInterceptor {
  return (method, call) => {
    const group = grpcMethodGroup(method.path);
    if (group === undefined || !restrictions.has(group)) return new ServerInterceptingCall(call);
    return new ServerInterceptingCall(call, {
      start: (next) =>
        next({
          onReceiveMetadata: (metadata, pass) => {
            const refused = checkGrpcRestriction(restrictions, group, (key) => {
              const values = metadata.get(key);
              return values.length === 1 && typeof values[0] === 'string' ? values[0] : undefined;
            });
            if (refused === undefined) {
              pass(metadata);
              return;
            }
            // Straight to the transport: the metadata is never passed on, so the handler never starts.
            const { code, details } = toGrpcError(refused);
            call.sendStatus({ code, details, metadata: new Metadata() });
          },
        }),
    });
  };
}
