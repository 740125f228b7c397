/**
 * Azure list prices the cost model uses (bench/cost.ts), and the alternatives docs/cost.md compares
 * against. Pay-as-you-go, USD, region East US, LRS, as of 2025-06 (the date of the figures below).
 *
 * Source: Azure's public pricing pages (azure.microsoft.com/pricing/details/storage/tables,
 * storage/queues, storage/blobs, functions; service-bus; virtual-machines/linux) and AWS's SQS
 * pricing page. These figures were taken from reference knowledge, not fetched when written:
 * check each against the pricing page (or the Azure Retail Prices API,
 * https://prices.azure.com/api/retail/prices) before quoting them.
 */
export const PRICES_AS_OF = '2025-06';
export const PRICES_REGION = 'East US (Azure), us-east-1 (AWS)';
export const PRICES_SOURCE = 'Azure and AWS public list prices, pay-as-you-go, from reference knowledge (unverified: check the pricing pages)';

export const AZURE_PRICES = {
  /** Table Storage (GPv2, LRS): every transaction (batch = 1), per 10,000. */
  tableTxPer10k: 0.00036,
  /** Queue Storage (GPv2, LRS): class 1 and class 2 operations alike, per 10,000. */
  queueOpPer10k: 0.004,
  /** Blob Storage (Hot, LRS): write operations (put block, commit, upload, set headers), per 10,000. */
  blobWritePer10k: 0.05,
  /** Blob Storage (Hot, LRS): read and other operations, per 10,000. */
  blobReadPer10k: 0.004,
  /** Functions Flex Consumption, on demand: execution time, per GB-s of instance memory while executing. */
  flexPerGbS: 0.000026,
  /** Functions Flex Consumption, on demand: per million executions. */
  flexPerMillionExecutions: 0.4,
  /** Flex Consumption instance memory the app is billed at (the default size; 512 MB and 4,096 MB are the others). */
  flexInstanceMb: 2048,
  /** Monthly free grant of Flex on demand (per subscription): left out of the per-million figures. */
  flexFreeGbS: 100_000,
  flexFreeExecutions: 250_000,
} as const;

/** What a user would pick instead (docs/cost.md), same date and source. */
export const ALTERNATIVE_PRICES = {
  /** Service Bus Standard: base charge per month (730 h × $0.0135), 13 M operations included. */
  serviceBusStandardBasePerMonth: 9.86,
  serviceBusStandardIncludedOps: 13_000_000,
  /** Service Bus Standard, 13 M-100 M operations/month: per million. */
  serviceBusStandardPerMillionOps: 0.8,
  /** Amazon SQS standard queue: per million requests (first million per month free). */
  sqsStandardPerMillionRequests: 0.4,
  /** A 2-vCPU, 8 GiB Linux VM (Azure D2s v5), per hour, running Taskcluster's services and PostgreSQL. */
  vmD2sV5PerHour: 0.096,
} as const;

/** Seconds in the 730-hour month Azure bills by. */
export const SECONDS_PER_MONTH = 730 * 3600;
