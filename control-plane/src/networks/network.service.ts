import { DataSource } from "typeorm";
import { DEFAULT_LOGS_CHUNK_BLOCKS, DEFAULT_MAX_LOGS_BLOCK_RANGE } from "../../../shared/src/redis/records";
import { isPlatformOperator, RequestContext } from "../auth/context";
import { batchLoader } from "../common/batch-loader";
import { badInput, forbidden, isUniqueViolation, isUuid, notFound, unauthenticated } from "../common/errors";
import { PublicationService } from "../publication/publication.service";
import { Network, NetworkProtocol } from "./network.entity";
import { Upstream, UpstreamArchiveMode, UpstreamMethodFamily } from "./upstream.entity";

export const SLUG_RE = /^[a-z0-9](?:[a-z0-9-]{0,46}[a-z0-9])?$/;
export const NETWORK_NAME_MAX = 64;
export const URL_MAX = 2048;
export const MAX_UPSTREAMS_PER_NETWORK = 64;
/** Upper bound of a network's maxLogsBlockRange (larger is as good as 0 = no limit, and stays an int4). */
export const MAX_LOGS_BLOCK_RANGE_MAX = 1_000_000_000;

function checkLogsBlockRange(v: number): number {
  if (!Number.isInteger(v) || v < 0 || v > MAX_LOGS_BLOCK_RANGE_MAX) {
    throw badInput(
      "maxLogsBlockRange",
      `maxLogsBlockRange must be 0..${MAX_LOGS_BLOCK_RANGE_MAX} (0 = no limit)`,
    );
  }
  return v;
}

/** Upper bound of an upstream's maxRequestsPerSecond. */
export const MAX_UPSTREAM_REQUESTS_PER_SECOND = 1_000_000;

/** The operator-settable capabilities of an upstream (docs/contracts.md#upstream-capabilities). */
export interface UpstreamCapabilitiesInput {
  archiveMode?: UpstreamArchiveMode | null;
  methodFamilies?: UpstreamMethodFamily[] | null;
  maxRequestsPerSecond?: number | null;
}

function checkWeight(weight: number): number {
  if (!Number.isInteger(weight) || weight < 1 || weight > 1000)
    throw badInput("weight", "weight must be 1..1000");
  return weight;
}

/** A budget as stored: null = none (0 in an input says so). */
function checkBudget(v: number): number | null {
  if (!Number.isInteger(v) || v < 0 || v > MAX_UPSTREAM_REQUESTS_PER_SECOND) {
    throw badInput(
      "maxRequestsPerSecond",
      `maxRequestsPerSecond must be 1..${MAX_UPSTREAM_REQUESTS_PER_SECOND} (0 = no budget)`,
    );
  }
  return v === 0 ? null : v;
}

/** Families as stored: deduplicated, in a fixed order, null when none ([] in an input says so). */
function checkFamilies(v: UpstreamMethodFamily[]): UpstreamMethodFamily[] | null {
  const known = Object.values(UpstreamMethodFamily);
  for (const f of v) {
    if (!known.includes(f))
      throw badInput("methodFamilies", `methodFamilies must be among ${known.join(", ")}`);
  }
  const set = known.filter((f) => v.includes(f));
  return set.length === 0 ? null : set;
}

/** Applies the capability fields present in `input` to `up` (absent or null: unchanged). */
function applyCapabilities(up: Upstream, input: UpstreamCapabilitiesInput): void {
  if (input.archiveMode != null) {
    if (!Object.values(UpstreamArchiveMode).includes(input.archiveMode)) {
      throw badInput("archiveMode", "archiveMode must be AUTO, ARCHIVE or PRUNED");
    }
    up.archiveMode = input.archiveMode;
  }
  if (input.methodFamilies != null) up.methodFamilies = checkFamilies(input.methodFamilies);
  if (input.maxRequestsPerSecond != null) up.maxRequestsPerSecond = checkBudget(input.maxRequestsPerSecond);
}

/** Upper bound of a network's logsChunkBlocks (as MAX_LOGS_BLOCK_RANGE_MAX: larger never splits anything). */
export const LOGS_CHUNK_BLOCKS_MAX = 1_000_000_000;

function checkLogsChunkBlocks(v: number): number {
  if (!Number.isInteger(v) || v < 0 || v > LOGS_CHUNK_BLOCKS_MAX) {
    throw badInput(
      "logsChunkBlocks",
      `logsChunkBlocks must be 0..${LOGS_CHUNK_BLOCKS_MAX} (0 = never split)`,
    );
  }
  return v;
}

export function requireOperator(ctx: RequestContext): void {
  if (!ctx.principal) throw unauthenticated();
  if (!isPlatformOperator(ctx)) throw forbidden("Only the operator may do this");
}

function checkUrl(field: string, raw: string, protocols: string[]): string {
  const v = raw.trim();
  let url: URL;
  try {
    url = new URL(v);
  } catch {
    throw badInput(field, `${field} must be a ${protocols.join(" or ")} URL`);
  }
  if (v.length > URL_MAX || !protocols.includes(url.protocol)) {
    throw badInput(
      field,
      `${field} must be a ${protocols.join(" or ")} URL of at most ${URL_MAX} characters`,
    );
  }
  return v;
}

export class NetworkService {
  constructor(
    private readonly ds: DataSource,
    private readonly publication: PublicationService,
  ) {}

  list(): Promise<Network[]> {
    return this.ds.getRepository(Network).find({ order: { slug: "ASC" } });
  }

  /** `list`, read once for all the fields of a request that ask for it in the same tick (every app's endpoints). */
  listFor(ctx: RequestContext): Promise<Network[]> {
    return batchLoader(
      ctx,
      "networks",
      async () => new Map([[0, await this.list()]]),
      (): Network[] => [],
    ).load(0);
  }

  upstreams(networkId: string): Promise<Upstream[]> {
    return this.ds
      .getRepository(Upstream)
      .find({ where: { networkId }, order: { createdAt: "ASC", id: "ASC" } });
  }

  async create(
    ctx: RequestContext,
    input: {
      slug: string;
      name: string;
      protocol: NetworkProtocol;
      chainId?: number | null;
      allowDebug?: boolean | null;
      maxLogsBlockRange?: number | null;
      logsChunkBlocks?: number | null;
    },
  ): Promise<Network> {
    requireOperator(ctx);
    const maxLogsBlockRange = checkLogsBlockRange(input.maxLogsBlockRange ?? DEFAULT_MAX_LOGS_BLOCK_RANGE);
    const logsChunkBlocks = checkLogsChunkBlocks(input.logsChunkBlocks ?? DEFAULT_LOGS_CHUNK_BLOCKS);
    const slug = input.slug.trim();
    if (!SLUG_RE.test(slug)) {
      throw badInput("slug", "slug must be 1-48 characters of a-z 0-9 and -, not starting or ending with -");
    }
    const name = input.name.trim();
    if (name.length < 1 || name.length > NETWORK_NAME_MAX) {
      throw badInput("name", `name must be 1-${NETWORK_NAME_MAX} characters`);
    }
    if (input.chainId != null && input.chainId <= 0) throw badInput("chainId", "chainId must be positive");
    const repo = this.ds.getRepository(Network);
    let net: Network;
    try {
      net = await repo.save(
        repo.create({
          slug,
          name,
          protocol: input.protocol,
          chainId: input.chainId ?? null,
          allowDebug: input.allowDebug ?? false,
          maxLogsBlockRange,
          logsChunkBlocks,
        }),
      );
    } catch (err) {
      if (isUniqueViolation(err)) throw badInput("slug", `A network with slug "${slug}" already exists`);
      throw err;
    }
    await this.publication.safely("networks", () => this.publication.publishNetworks());
    return net;
  }

  /** Operator: edits a network's settings and republishes the networks to the data planes. */
  async update(
    ctx: RequestContext,
    slug: string,
    input: {
      name?: string | null;
      allowDebug?: boolean | null;
      maxLogsBlockRange?: number | null;
      logsChunkBlocks?: number | null;
    },
  ): Promise<Network> {
    requireOperator(ctx);
    const repo = this.ds.getRepository(Network);
    const net = await repo.findOneBy({ slug });
    if (!net) throw notFound("Network");
    if (input.name != null) {
      const name = input.name.trim();
      if (name.length < 1 || name.length > NETWORK_NAME_MAX) {
        throw badInput("name", `name must be 1-${NETWORK_NAME_MAX} characters`);
      }
      net.name = name;
    }
    if (input.allowDebug != null) net.allowDebug = input.allowDebug;
    if (input.maxLogsBlockRange != null) net.maxLogsBlockRange = checkLogsBlockRange(input.maxLogsBlockRange);
    if (input.logsChunkBlocks != null) net.logsChunkBlocks = checkLogsChunkBlocks(input.logsChunkBlocks);
    const saved = await repo.save(net);
    await this.publication.safely("networks", () => this.publication.publishNetworks());
    return saved;
  }

  async addUpstream(
    ctx: RequestContext,
    networkSlug: string,
    input: { httpUrl: string; wsUrl?: string | null; weight?: number | null } & UpstreamCapabilitiesInput,
  ): Promise<Upstream> {
    requireOperator(ctx);
    const net = await this.ds.getRepository(Network).findOneBy({ slug: networkSlug });
    if (!net) throw notFound("Network");
    const httpUrl = checkUrl("httpUrl", input.httpUrl, ["http:", "https:"]);
    const wsUrl =
      input.wsUrl == null || input.wsUrl === "" ? null : checkUrl("wsUrl", input.wsUrl, ["ws:", "wss:"]);
    const weight = checkWeight(input.weight ?? 1);
    const repo = this.ds.getRepository(Upstream);
    const up = repo.create({
      networkId: net.id,
      httpUrl,
      wsUrl,
      weight,
      archiveMode: UpstreamArchiveMode.AUTO,
      methodFamilies: null,
      maxRequestsPerSecond: null,
    });
    applyCapabilities(up, input);
    if ((await repo.countBy({ networkId: net.id })) >= MAX_UPSTREAMS_PER_NETWORK) {
      throw badInput("httpUrl", `A network may have at most ${MAX_UPSTREAMS_PER_NETWORK} upstreams`);
    }
    const saved = await repo.save(up);
    await this.publication.safely("networks", () => this.publication.publishNetworks());
    return saved;
  }

  /**
   * Operator: edits an upstream's weight and capabilities (fields left out or null keep their value)
   * and republishes, so data planes route by them at once (NetworkPool.update keeps its health and what
   * its state probe found).
   */
  async updateUpstream(
    ctx: RequestContext,
    networkSlug: string,
    upstreamId: string,
    input: { weight?: number | null } & UpstreamCapabilitiesInput,
  ): Promise<Upstream> {
    requireOperator(ctx);
    const net = await this.ds.getRepository(Network).findOneBy({ slug: networkSlug });
    if (!net) throw notFound("Network");
    if (!isUuid(upstreamId)) throw notFound("Upstream");
    const repo = this.ds.getRepository(Upstream);
    const up = await repo.findOneBy({ id: upstreamId, networkId: net.id });
    if (!up) throw notFound("Upstream");
    if (input.weight != null) up.weight = checkWeight(input.weight);
    applyCapabilities(up, input);
    const saved = await repo.save(up);
    await this.publication.safely("networks", () => this.publication.publishNetworks());
    return saved;
  }

  /**
   * Removes a network and its upstreams; refused while a dedicated node is on it (its row references the
   * network, ON DELETE RESTRICT), so no node is left without its network. Data planes drop the pool at the
   * networks.update event; requests naming the slug then get the unknown-network answer.
   */
  async removeNetwork(ctx: RequestContext, slug: string): Promise<Network> {
    requireOperator(ctx);
    const repo = this.ds.getRepository(Network);
    const net = await repo.findOneBy({ slug });
    if (!net) throw notFound("Network");
    try {
      await repo.delete({ id: net.id });
    } catch (err) {
      const e = err as { code?: string; driverError?: { code?: string } };
      if (e?.code === "23503" || e?.driverError?.code === "23503")
        throw badInput("slug", "Dedicated nodes run on this network: delete them first");
      throw err;
    }
    await this.publication.safely("networks", () => this.publication.publishNetworks());
    return net;
  }

  async removeUpstream(ctx: RequestContext, id: string): Promise<Upstream> {
    requireOperator(ctx);
    if (!isUuid(id)) throw notFound("Upstream");
    const repo = this.ds.getRepository(Upstream);
    const up = await repo.findOneBy({ id });
    if (!up) throw notFound("Upstream");
    await repo.delete({ id });
    await this.publication.safely("networks", () => this.publication.publishNetworks());
    return up;
  }
}
