/** SCALE helpers live in shared/src/substrate (the node worker decodes chain state with them). */
export * from "../../shared/src/substrate/scale";
