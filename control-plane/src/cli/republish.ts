import "reflect-metadata";
import { RedisNames } from "../../../shared/src/redis/keys";
import { PublicationService } from "../publication/publication.service";
import { runCli } from "./run-cli";

/** `npm run republish`: rebuild every Redis record from Postgres once, print the counts as JSON. */
runCli("republish", ({ config, ds, redis, log }) =>
  new PublicationService(ds, redis, new RedisNames(config.redisKeyPrefix), log).republishAll(),
);
