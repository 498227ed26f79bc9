import { Field, Int, ObjectType, registerEnumType } from "type-graphql";
import { Column, Entity, JoinColumn, OneToOne, PrimaryColumn, UpdateDateColumn } from "typeorm";
import { App } from "../apps/app.entity";

export enum MethodRuleMode {
  ALLOW = "ALLOW",
  DENY = "DENY",
}
registerEnumType(MethodRuleMode, {
  name: "MethodRuleMode",
  description:
    "ALLOW: only the listed methods may be called; DENY: every method but the listed ones (an empty deny-list is no rule).",
});

/**
 * An app's access rules (docs/access-rules.md, docs/contracts.md#access-rules): at most one row per app;
 * an app without a row has none (`AccessRules.none`). Published inside the app's key records
 * (`KeyRecord.access`) and enforced by the data plane over HTTP and WebSocket.
 */
@ObjectType("AccessRules")
@Entity({ name: "app_access_rules" })
export class AppAccessRules {
  @PrimaryColumn({ name: "app_id", type: "uuid" })
  appId: string;

  @OneToOne(() => App, { onDelete: "CASCADE" })
  @JoinColumn({ name: "app_id" })
  app: App;

  @Field(() => MethodRuleMode)
  @Column({ name: "method_mode", type: "text" })
  methodMode: MethodRuleMode;

  @Field(() => [String], {
    description:
      "Exact method names (eth_call) or namespace patterns (debug_*), compared case-insensitively.",
  })
  @Column({ type: "text", array: true })
  methods: string[];

  @Field(() => Int, {
    nullable: true,
    description: "The app's own requests per second; the plan's limit still applies when lower. Null: none.",
  })
  @Column({ name: "requests_per_second", type: "integer", nullable: true })
  requestsPerSecond: number | null;

  @Field(() => Int, {
    nullable: true,
    description:
      "The app's own compute units per second (method weights); the plan's limit still applies when lower. Null: none.",
  })
  @Column({ name: "compute_units_per_second", type: "integer", nullable: true })
  computeUnitsPerSecond: number | null;

  @Field(() => Int, {
    nullable: true,
    description:
      "The app's own response units per UTC day; the workspace's daily limit still applies. Null: none.",
  })
  @Column({ name: "requests_per_day", type: "integer", nullable: true })
  requestsPerDay: number | null;

  @Field(() => [String], {
    description: "Allowed User-Agent patterns (* = any run of characters); empty: any user agent.",
  })
  @Column({ name: "user_agents", type: "text", array: true })
  userAgents: string[];

  @Field({ description: "Every request must carry a JWT signed by one of the app's jwtKeys." })
  @Column({ name: "jwt_required", type: "boolean" })
  jwtRequired: boolean;

  @Field(() => String, { nullable: true, description: "When set, a JWT's aud must be (or contain) it." })
  @Column({ name: "jwt_audience", type: "text", nullable: true })
  jwtAudience: string | null;

  @Field(() => String, { nullable: true, description: "When set, a JWT's sub must equal it." })
  @Column({ name: "jwt_subject", type: "text", nullable: true })
  jwtSubject: string | null;

  @Field(() => Date, { nullable: true, description: "Last change; null: never set." })
  @UpdateDateColumn({ name: "updated_at", type: "timestamptz" })
  updatedAt: Date | null;

  /** The rules of an app that never set any. */
  static none(appId: string): AppAccessRules {
    const r = new AppAccessRules();
    r.appId = appId;
    r.methodMode = MethodRuleMode.DENY;
    r.methods = [];
    r.requestsPerSecond = null;
    r.computeUnitsPerSecond = null;
    r.requestsPerDay = null;
    r.userAgents = [];
    r.jwtRequired = false;
    r.jwtAudience = null;
    r.jwtSubject = null;
    // Left unset (not null): a first save lets Postgres stamp it.
    return r;
  }
}
