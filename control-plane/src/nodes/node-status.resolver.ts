import { Arg, ID, Resolver, Root, Subscription } from "type-graphql";
import type { GqlContext } from "../graphql/context";
import { DedicatedNode } from "./node.entity";
import { NodeStatus } from "./node.types";

function fingerprint(n: DedicatedNode): string {
  return JSON.stringify([n.status, n.statusReason, n.validatorStatus, n.rpcMethods, n.generation]);
}

/**
 * The node's current state first, then again at every status change (status, statusReason, validator
 * status, launch args), until DELETED. Same access rule as `dedicatedNode`: another workspace's node is
 * NOT_FOUND.
 */
async function nodeStatusStream(ctx: GqlContext, id: string): Promise<AsyncIterable<DedicatedNode>> {
  const first = await ctx.services.nodes.nodeForCaller(ctx, id);
  const updates = await ctx.services.nodes.statusHub.updates(first.id);
  const nodes = ctx.services.nodes;
  async function* stream(): AsyncGenerator<DedicatedNode> {
    try {
      let last = fingerprint(first);
      yield first;
      if (first.status === NodeStatus.DELETED) return;
      for await (const _ of updates) {
        const n = await nodes.nodeForCaller(ctx, id).catch(() => undefined);
        if (!n) return;
        const f = fingerprint(n);
        if (f === last) continue;
        last = f;
        yield n;
        if (n.status === NodeStatus.DELETED) return;
      }
    } finally {
      await updates.return?.();
    }
  }
  return stream();
}

@Resolver()
export class NodeStatusResolver {
  @Subscription(() => DedicatedNode, {
    description:
      'graphql-ws (`ws://HOST:PORT/graphql`, connectionParams `{ authorization: "Bearer TOKEN" }`): the node now, then at every status change, until DELETED.',
    subscribe: ({ args, context }) => nodeStatusStream(context as GqlContext, String(args.id)),
  })
  dedicatedNodeStatus(@Arg("id", () => ID) _id: string, @Root() node: DedicatedNode): DedicatedNode {
    return node;
  }
}
