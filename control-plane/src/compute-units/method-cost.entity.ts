import { Column, Entity, PrimaryGeneratedColumn, UpdateDateColumn } from "typeorm";

/**
 * One method weight in compute units (docs/compute-units.md): in the platform default table
 * (`networkId` null) or a network's override. Method `*` is the weight of every method not listed.
 */
@Entity({ name: "method_costs" })
export class MethodCost {
  @PrimaryGeneratedColumn("uuid")
  id: string;

  @Column({ name: "network_id", type: "uuid", nullable: true })
  networkId: string | null;

  @Column({ type: "text" })
  method: string;

  @Column({ type: "integer" })
  units: number;

  @UpdateDateColumn({ name: "updated_at", type: "timestamptz" })
  updatedAt: Date;
}
