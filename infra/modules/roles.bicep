// The single table of Azure built-in role definition GUIDs used by this template.
// Checked (search, 2025/26 index): each GUID matched against the Microsoft built-in role list
// (MicrosoftDocs built-in-roles pages) and public Bicep templates:
//   Storage Blob Data Owner, Key Vault Secrets User, Key Vault Secrets Officer,
//   Monitoring Metrics Publisher, EventGrid Data Sender, Storage Blob Data Contributor,
//   Storage Table Data Contributor, Reader and Data Access (its actions: storageAccounts/listKeys,
//   ListAccountSas and read; azadvertizer and the azure-rbac-catalog role JSON).
//   test/infra.test.ts fails if a GUID appears anywhere else.
// Compile-time import (@export/import) needs Bicep CLI >= 0.25.

@export()
@description('Built-in role definition GUIDs; they are the same in every subscription.')
var builtInRoleIds = {
  // Host storage only: the Functions host (timer lease, deployment package) needs blob data access.
  storageBlobDataOwner: 'b7e6dc6d-f1e8-4753-8033-0f276bb0955b'
  // Key Vault references: read one secret's value.
  keyVaultSecretsUser: '4633458b-17de-408a-b874-0445c86b69e6'
  // Optional operator (adminPrincipalId): read and set secrets, for root-token rotation.
  keyVaultSecretsOfficer: 'b86a8fe4-44ce-4948-aee5-eccb2c155cd7'
  // Application Insights with local (key) auth disabled: publish telemetry with Entra ID.
  monitoringMetricsPublisher: '3913510d-42f4-4e42-8a64-420c390055eb'
  // Optional Event Grid topic (deployEventGridTopic): publish queue events with Entra ID.
  eventGridDataSender: 'd5a91429-5739-47e2-a06b-3470a27159e7'
  // Delegated accounts (delegatedStorageAccounts): create and list containers and get user delegation
  // keys (generateUserDelegationKey is one of its actions); a user delegation SAS grants at most this.
  storageBlobDataContributor: 'ba92f5b4-2d11-453d-a403-e96b0029c9fe'
  // Delegated accounts: create and list tables through the identity's token.
  storageTableDataContributor: '0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3'
  // Delegated accounts: listKeys, to sign table SAS (the Table SDK has no user delegation SAS); unlike
  // Storage Account Key Operator Service Role it cannot regenerate keys.
  readerAndDataAccess: 'c12c1c16-33a1-487b-954d-41c89c60f349'
}
