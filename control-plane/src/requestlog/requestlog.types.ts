import { Field, Float, ID, InputType, Int, ObjectType } from "type-graphql";

@InputType({
  description: "What `requestLog` lists; every field is optional. `requestId` finds one request.",
})
export class RequestLogFilter {
  @Field(() => ID, {
    nullable: true,
    description: "Operator: the workspace to list. Accounts: one of their workspaces (default: their own).",
  })
  workspaceId?: string | null;

  @Field(() => ID, { nullable: true, description: "Only this app (of the workspace)." })
  appId?: string | null;

  @Field(() => String, {
    nullable: true,
    description: "Only this network slug (`node-{id}` for a dedicated node).",
  })
  network?: string | null;

  @Field(() => String, { nullable: true, description: "Only this JSON-RPC method." })
  method?: string | null;

  @Field(() => String, {
    nullable: true,
    description: "Only this category (`Success`, `Client Error`, `Node Error`, ...).",
  })
  category?: string | null;

  @Field(() => Date, { nullable: true, description: "Range start (inclusive)." })
  from?: Date | null;

  @Field(() => Date, { nullable: true, description: "Range end (exclusive)." })
  to?: Date | null;

  @Field(() => String, {
    nullable: true,
    description: "The `requestId` of an error response (or `X-Request-Id`): that request's records.",
  })
  requestId?: string | null;
}

@ObjectType({ description: "One logged request object (a batch logs one per element, `item` its position)." })
export class RequestLogEntry {
  @Field(() => Date) time: Date;
  @Field(() => String) requestId: string;
  @Field(() => Int) item: number;
  @Field(() => ID) workspaceId: string;
  @Field(() => ID, { nullable: true }) appId: string | null;
  @Field(() => String) network: string;
  @Field(() => String, { description: "`http`, `ws` or `node` (a dedicated node's endpoint)." })
  transport: string;
  @Field(() => String, {
    description:
      "The method as stored: at most 100 characters, control characters and lone surrogates as U+FFFD.",
  })
  method: string;
  @Field(() => Int, {
    nullable: true,
    description:
      "The client's method name's length when `method` is not it verbatim (cut or characters replaced); null otherwise.",
  })
  methodLength: number | null;
  @Field(() => Int, { description: "HTTP status of the response (0 on WebSocket)." })
  httpStatus: number;
  @Field(() => String) category: string;
  @Field(() => String, { description: "The gateway's error reason (`rate_limited`...); empty otherwise." })
  reason: string;
  @Field(() => Float) latencyMs: number;
  @Field(() => String, {
    nullable: true,
    description: "Client address truncated to its /24 (IPv4) or /48 (IPv6).",
  })
  clientIp: string | null;
  @Field(() => Int, {
    nullable: true,
    description:
      "Compute units this request object was charged (its method's weight); null when logged by a data plane older than compute units, which charged 1.",
  })
  computeUnits: number | null;
}

@ObjectType()
export class RequestLogEdge {
  @Field(() => RequestLogEntry) node: RequestLogEntry;
  @Field(() => String) cursor: string;
}

@ObjectType()
export class RequestLogPageInfo {
  @Field(() => Boolean) hasNextPage: boolean;
  @Field(() => String, { nullable: true }) endCursor: string | null;
}

@ObjectType({ description: "Request log page, newest first." })
export class RequestLogConnection {
  @Field(() => [RequestLogEdge]) edges: RequestLogEdge[];
  @Field(() => RequestLogPageInfo) pageInfo: RequestLogPageInfo;
}
