import { Arg, Ctx, Field, ID, Mutation, ObjectType, Query, Resolver, registerEnumType } from "type-graphql";
import { GqlContext } from "../graphql/context";
import { InvitationStatus } from "./member.service";
import { WorkspaceRole } from "./roles";
import { Workspace } from "./workspace.entity";

registerEnumType(InvitationStatus, { name: "InvitationStatus" });

@ObjectType({ description: "An account's membership of a workspace." })
export class WorkspaceMember {
  @Field(() => ID, { description: "The membership's id (what the member mutations take)." })
  id: string;

  @Field(() => ID)
  workspaceId: string;

  @Field(() => ID)
  accountId: string;

  @Field()
  email: string;

  @Field(() => WorkspaceRole)
  role: WorkspaceRole;

  @Field()
  joinedAt: Date;

  @Field({ description: "This membership is the caller's own." })
  isCaller: boolean;
}

@ObjectType("Invitation")
export class InvitationType {
  @Field(() => ID)
  id: string;

  @Field(() => ID)
  workspaceId: string;

  @Field()
  email: string;

  @Field(() => WorkspaceRole)
  role: WorkspaceRole;

  @Field()
  createdAt: Date;

  @Field()
  expiresAt: Date;

  @Field(() => InvitationStatus)
  status: InvitationStatus;

  @Field(() => String, { nullable: true, description: "Null when invited by the operator." })
  invitedByEmail: string | null;
}

@ObjectType()
export class CreatedInvitation {
  @Field({ description: "The single-use token: shown only in this answer (stored hashed)." })
  token: string;

  @Field({ description: "The console's accept page with the token (`{PUBLIC_CONSOLE_URL}/invite#TOKEN`)." })
  link: string;

  @Field(() => InvitationType)
  invitation: InvitationType;
}

@ObjectType({ description: "What an invitation link offers; readable by whoever holds the token." })
export class InvitationPreview {
  @Field()
  workspaceName: string;

  @Field({ description: "The email the accepting account must have." })
  email: string;

  @Field(() => WorkspaceRole)
  role: WorkspaceRole;

  @Field()
  expiresAt: Date;

  @Field(() => InvitationStatus)
  status: InvitationStatus;
}

/** Members, invitations and ownership; rules in MemberService and roles.ts. */
@Resolver()
export class MemberResolver {
  @Query(() => [WorkspaceMember], {
    description: "Members of the workspace (default: the caller's), OWNER first. Any role may list them.",
  })
  members(
    @Arg("workspaceId", () => ID, { nullable: true }) workspaceId: string | null,
    @Ctx() ctx: GqlContext,
  ): Promise<WorkspaceMember[]> {
    return ctx.services.members.members(ctx, workspaceId);
  }

  @Query(() => [InvitationType], { description: "Pending invitations, newest first (OWNER and ADMIN)." })
  invitations(
    @Arg("workspaceId", () => ID, { nullable: true }) workspaceId: string | null,
    @Ctx() ctx: GqlContext,
  ): Promise<InvitationType[]> {
    return ctx.services.members.invitations(ctx, workspaceId);
  }

  @Query(() => InvitationPreview, {
    description: "The invitation a token stands for (no login needed: the accept page shows it).",
  })
  invitation(@Arg("token", () => String) token: string, @Ctx() ctx: GqlContext): Promise<InvitationPreview> {
    return ctx.services.members.preview(token);
  }

  @Mutation(() => CreatedInvitation, {
    description:
      "A single-use invitation valid 7 days (OWNER: ADMIN/MEMBER/VIEWER; ADMIN: MEMBER/VIEWER). No mail is sent: pass the link on.",
  })
  inviteMember(
    @Arg("email", () => String) email: string,
    @Arg("role", () => WorkspaceRole) role: WorkspaceRole,
    @Arg("workspaceId", () => ID, { nullable: true }) workspaceId: string | null,
    @Ctx() ctx: GqlContext,
  ): Promise<CreatedInvitation> {
    return ctx.services.members.invite(ctx, email, role, workspaceId);
  }

  @Mutation(() => InvitationType, { description: "The link stops working at once." })
  revokeInvitation(@Arg("id", () => ID) id: string, @Ctx() ctx: GqlContext): Promise<InvitationType> {
    return ctx.services.members.revokeInvitation(ctx, id);
  }

  @Mutation(() => Workspace, {
    description:
      "The logged-in account (with the invitation's email) joins the workspace with the invitation's role.",
  })
  acceptInvitation(@Arg("token", () => String) token: string, @Ctx() ctx: GqlContext): Promise<Workspace> {
    return ctx.services.members.accept(ctx, token);
  }

  @Mutation(() => WorkspaceMember, { description: "Only for members and roles below the caller's." })
  changeMemberRole(
    @Arg("memberId", () => ID) memberId: string,
    @Arg("role", () => WorkspaceRole) role: WorkspaceRole,
    @Ctx() ctx: GqlContext,
  ): Promise<WorkspaceMember> {
    return ctx.services.members.changeRole(ctx, memberId, role);
  }

  @Mutation(() => ID, {
    description:
      "Removes a member below the caller's role (or the caller itself: leaving). Returns the membership id.",
  })
  removeMember(@Arg("memberId", () => ID) memberId: string, @Ctx() ctx: GqlContext): Promise<string> {
    return ctx.services.members.remove(ctx, memberId);
  }

  @Mutation(() => ID, {
    description:
      "The caller leaves the workspace (the OWNER transfers ownership first). Returns the membership id.",
  })
  leaveWorkspace(@Arg("workspaceId", () => ID) workspaceId: string, @Ctx() ctx: GqlContext): Promise<string> {
    return ctx.services.members.leave(ctx, workspaceId);
  }

  @Mutation(() => WorkspaceMember, {
    description: "OWNER: makes the member the owner; the caller stays as ADMIN. Returns the new owner.",
  })
  transferOwnership(
    @Arg("memberId", () => ID) memberId: string,
    @Ctx() ctx: GqlContext,
  ): Promise<WorkspaceMember> {
    return ctx.services.members.transferOwnership(ctx, memberId);
  }
}
