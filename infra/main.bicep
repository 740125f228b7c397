// Taskcluster-compatible Queue on Azure Functions (Flex Consumption), resource-group scope.
//
// Deploys: a user-assigned identity; Log Analytics + Application Insights; a host storage account
// (identity-only) with the deployment-package container; a data storage account (tables, queues,
// blobs; shared key on, for SAS); Key Vault (RBAC) with the three app secrets; an FC1 plan and the
// function app whose settings reference those secrets; optionally, the identity's roles on existing
// accounts Auth delegates (delegatedStorageAccounts). See infra/README.md.
//
// Checked: plain resource declarations only (no br/public registry modules, so `az bicep build`
// needs no network). API versions used, each confirmed in Azure/bicep-types-az generated type docs:
//   Microsoft.Web/serverfarms, sites, sites/config           2024-04-01
//   Microsoft.Storage/storageAccounts (+ blobServices/containers) 2023-05-01
//   Microsoft.KeyVault/vaults, vaults/secrets                 2023-07-01
//   Microsoft.ManagedIdentity/userAssignedIdentities          2023-01-31
//   Microsoft.OperationalInsights/workspaces                  2023-09-01
//   Microsoft.Insights/components                             2020-02-02
//   Microsoft.Authorization/roleAssignments                   2022-04-01
//   Microsoft.EventGrid/topics (optional)                      2025-02-15
// Compiled and linted in CI by the pinned Bicep compiler (npm run infra:build); not deployed from CI.

targetScope = 'resourceGroup'

// ---------------------------------------------------------------------------------------------
// Naming and placement
// ---------------------------------------------------------------------------------------------

@description('Short prefix for resource names: lowercase letters, digits and hyphens.')
@minLength(2)
@maxLength(12)
param namePrefix string = 'tcq'

@description('Azure region for every resource; it must offer Flex Consumption.')
param location string = resourceGroup().location

@description('Tags applied to every resource.')
param tags object = {}

@description('Function app name override (globally unique; becomes <name>.azurewebsites.net). Empty: derived from namePrefix.')
@maxLength(60)
param functionAppName string = ''

// ---------------------------------------------------------------------------------------------
// Function app runtime and scale
// ---------------------------------------------------------------------------------------------

@description('Node.js major version of the Functions runtime. CI runs the unit tier and the conformance suite on 22 (npm run test:node22) and on 20.')
@allowed([
  '20'
  '22'
])
param nodeRuntimeVersion string = '22'

@description('Instance memory (MB). CPU and network scale with it.')
@allowed([
  512
  2048
  4096
])
param instanceMemoryMB int = 2048

@description('Most instances the app scales out to (a cost ceiling).')
@minValue(1)
@maxValue(1000)
param maximumInstanceCount int = 100

@description('Concurrent HTTP requests one instance takes before Flex adds another. claimWork holds a request ~QUEUE_CLAIM_WORK_POLL_S seconds while mostly idle, so this is sized for many parked long polls, not for CPU-bound work.')
@minValue(1)
@maxValue(1000)
param httpPerInstanceConcurrency int = 200

@description('Always-ready instances for HTTP functions (0 scales to zero; more avoids cold starts but is billed continuously).')
@minValue(0)
@maxValue(20)
param alwaysReadyInstances int = 0

@description('Browser origins (the dashboard) allowed to call the API and fetch artifact blobs. Empty: no CORS.')
param corsAllowedOrigins array = []

@description('Replication SKU of the queue data storage account.')
@allowed([
  'Standard_LRS'
  'Standard_ZRS'
  'Standard_GRS'
  'Standard_GZRS'
  'Standard_RAGRS'
  'Standard_RAGZRS'
])
param dataStorageSku string = 'Standard_LRS'

@description('Number of queue data storage accounts. Tasks spread over them by taskId, task queues by id; one account carries about 20,000 transactions/s (README "Performance"). Only raise it: accounts are appended (QUEUE_STORAGE_MORE_CONNECTIONS) and data never moves; lowering it loses the data of the dropped accounts, so the app refuses to start.')
@minValue(1)
@maxValue(16)
param dataAccountCount int = 1

@description('Days Log Analytics keeps logs.')
@minValue(30)
@maxValue(730)
param logRetentionDays int = 30

// ---------------------------------------------------------------------------------------------
// Key Vault and secrets
// ---------------------------------------------------------------------------------------------

@secure()
@minLength(22)
@description('QUEUE_ROOT_ACCESS_TOKEN: access token of the static root client (at least 22 characters). Stored in Key Vault.')
param rootAccessToken string

@secure()
@minLength(44)
@maxLength(44)
@description('QUEUE_TOKEN_ENCRYPTION_KEY: 32 random bytes, base64 (44 characters), e.g. `openssl rand -base64 32`. Stored in Key Vault. Changing it makes stored client tokens unreadable.')
param tokenEncryptionKey string

@description('Optional principal (object id) granted Key Vault Secrets Officer, to read the root credentials and rotate secrets. Empty: none.')
param adminPrincipalId string = ''

@description('Type of adminPrincipalId.')
@allowed([
  'User'
  'Group'
  'ServicePrincipal'
])
param adminPrincipalType string = 'User'

@description('Key Vault purge protection (irreversible once on).')
param keyVaultPurgeProtection bool = true

// ---------------------------------------------------------------------------------------------
// Queue service settings (QUEUE_* app settings read by shared/config.ts)
// ---------------------------------------------------------------------------------------------

@description('QUEUE_STORAGE_PREFIX: prefix of every table, queue and container name (1-20 lowercase letters/digits, starting with a letter).')
@minLength(1)
@maxLength(20)
param storagePrefix string = 'tcq'

@description('QUEUE_PUBLIC_URL override, e.g. https://queue.example.com when a custom domain or gateway fronts the app (Hawk signatures cover the host clients use). Empty: https://<default hostname of the function app>.')
param publicUrl string = ''

@description('QUEUE_ROOT_CLIENT_ID: client id of the static root client.')
param rootClientId string = 'static/root'

@description('QUEUE_ISSUER_CLIENT_ID: client id that signs the temporary credentials handed to workers.')
param issuerClientId string = 'static/taskcluster/queue'

@description('QUEUE_CLAIM_TIMEOUT_S: seconds a claim lasts (takenUntil) before the worker must reclaim.')
@minValue(60)
param claimTimeoutSeconds int = 1200

@description('QUEUE_CLAIM_WORK_POLL_S: seconds claimWork waits for work; keep it below the 30 s client timeout.')
@minValue(0)
@maxValue(29)
param claimWorkPollSeconds int = 20

@description('QUEUE_DEADLINE_DELAY_S: grace seconds after a task deadline before the reaper resolves it.')
@minValue(0)
param deadlineDelaySeconds int = 60

@description('QUEUE_REAPER_SCHEDULE: NCRONTAB (6 fields, UTC) of the reaper timer.')
param reaperSchedule string = '*/10 * * * * *'

@description('QUEUE_REAPER_STALE_S: the health endpoint (/api/queue/v1/__heartbeat__) answers 500 once the reaper has not finished a pass for this many seconds.')
@minValue(1)
param reaperStaleSeconds int = 300

@description('QUEUE_MAX_TASK_DEADLINE_DAYS: maximum task deadline, in days from now. Delayed trigger messages are capped by the 7-day storage queue visibility limit.')
@minValue(1)
param maxTaskDeadlineDays int = 5

@description('QUEUE_PENDING_SHARDS: pending storage queues per task queue and priority (1-16; one carries about 2,000 hints/s), then optional `<taskQueueId>=<n>` overrides, whitespace-separated.')
param pendingShards string = '1'

@description('Deploy an Event Grid custom topic that receives every queue event as a CloudEvent 1.0 (QUEUE_EVENTGRID_ENDPOINT), published with the app identity.')
param deployEventGridTopic bool = false

@description('QUEUE_AZURE_ACCOUNTS: existing storage accounts whose tables and containers Auth hands out SAS for (azureTableSAS, azureContainerSAS), reached through the app identity with no key in the settings: [{"name": "<account>", "resourceGroup": "<its group; default this one>"}]. The identity gets Storage Blob Data Contributor, Storage Table Data Contributor and Reader and Data Access (listKeys, for table SAS) on each. Empty: none.')
param delegatedStorageAccounts array = []

// ---------------------------------------------------------------------------------------------
// Names
// ---------------------------------------------------------------------------------------------

var token = toLower(uniqueString(resourceGroup().id, namePrefix))
var compactPrefix = take(toLower(replace(namePrefix, '-', '')), 8)
var appName = empty(functionAppName) ? '${toLower(namePrefix)}-${token}' : functionAppName
var names = {
  identity: 'id-${appName}'
  plan: 'plan-${appName}'
  workspace: 'log-${appName}'
  appInsights: 'appi-${appName}'
  hostStorage: 'st${compactPrefix}h${token}'
  dataStorage: 'st${compactPrefix}d${token}'
  // Further data accounts: st<6 of the prefix>d<nn><token>, at most 24 characters.
  moreDataStorage: 'st${take(compactPrefix, 6)}d'
  keyVault: 'kv-${take(compactPrefix, 6)}-${token}'
  eventGridTopic: 'evgt-${appName}'
  deploymentContainer: 'app-package'
}

// ---------------------------------------------------------------------------------------------
// Resources
// ---------------------------------------------------------------------------------------------

module identity 'modules/identity.bicep' = {
  name: 'identity'
  params: {
    name: names.identity
    location: location
    tags: tags
  }
}

module monitoring 'modules/monitoring.bicep' = {
  name: 'monitoring'
  params: {
    workspaceName: names.workspace
    appInsightsName: names.appInsights
    location: location
    tags: tags
    retentionInDays: logRetentionDays
    publisherPrincipalId: identity.outputs.principalId
  }
}

module hostStorage 'modules/host-storage.bicep' = {
  name: 'host-storage'
  params: {
    name: names.hostStorage
    location: location
    tags: tags
    deploymentContainerName: names.deploymentContainer
    appPrincipalId: identity.outputs.principalId
  }
}

// Account 0 keeps its original name and deployment name; accounts 1.. are the appended ones.
module dataStorage 'modules/data-storage.bicep' = [
  for i in range(0, dataAccountCount): {
    name: i == 0 ? 'data-storage' : 'data-storage-${i}'
    params: {
      name: i == 0 ? names.dataStorage : '${names.moreDataStorage}${padLeft(string(i), 2, '0')}${token}'
      location: location
      tags: tags
      skuName: dataStorageSku
      corsAllowedOrigins: corsAllowedOrigins
    }
  }
]

module keyVault 'modules/keyvault.bicep' = {
  name: 'keyvault'
  params: {
    name: names.keyVault
    location: location
    tags: tags
    dataStorageAccountName: dataStorage[0].outputs.name
    moreDataStorageAccountNames: [for i in range(1, dataAccountCount - 1): dataStorage[i].outputs.name]
    appPrincipalId: identity.outputs.principalId
    adminPrincipalId: adminPrincipalId
    adminPrincipalType: adminPrincipalType
    enablePurgeProtection: keyVaultPurgeProtection
    rootAccessToken: rootAccessToken
    tokenEncryptionKey: tokenEncryptionKey
  }
}

module eventGrid 'modules/eventgrid.bicep' = if (deployEventGridTopic) {
  name: 'eventgrid'
  params: {
    name: take(names.eventGridTopic, 50)
    location: location
    tags: tags
    publisherPrincipalId: identity.outputs.principalId
  }
}

// Each account's roles are granted where it lives; its QUEUE_AZURE_ACCOUNTS entry is an output, so the
// app settings are written after the roles.
module delegatedAccounts 'modules/delegated-account.bicep' = [
  for a in delegatedStorageAccounts: {
    name: take('delegated-${a.name}-${token}', 64)
    scope: resourceGroup(a.?resourceGroup ?? resourceGroup().name)
    params: {
      accountName: a.name
      appPrincipalId: identity.outputs.principalId
      appClientId: identity.outputs.clientId
    }
  }
]

// Depends on every module above through their outputs, so the identity's role assignments
// (host blob data, Key Vault secrets, telemetry) exist before the app settings are written.
module functionApp 'modules/functionapp.bicep' = {
  name: 'functionapp'
  params: {
    name: appName
    planName: names.plan
    location: location
    tags: tags
    identityId: identity.outputs.id
    identityClientId: identity.outputs.clientId
    hostStorageAccountName: hostStorage.outputs.name
    deploymentContainerUrl: hostStorage.outputs.deploymentContainerUrl
    appInsightsConnectionString: monitoring.outputs.connectionString
    nodeRuntimeVersion: nodeRuntimeVersion
    instanceMemoryMB: instanceMemoryMB
    maximumInstanceCount: maximumInstanceCount
    httpPerInstanceConcurrency: httpPerInstanceConcurrency
    alwaysReadyInstances: alwaysReadyInstances
    corsAllowedOrigins: corsAllowedOrigins
    storageConnectionSecretUri: keyVault.outputs.storageConnectionSecretUri
    moreStorageConnectionsSecretUri: keyVault.outputs.moreStorageConnectionsSecretUri
    rootAccessTokenSecretUri: keyVault.outputs.rootAccessTokenSecretUri
    tokenEncryptionKeySecretUri: keyVault.outputs.tokenEncryptionKeySecretUri
    publicQueueEndpoint: dataStorage[0].outputs.queueEndpoint
    publicUrl: publicUrl
    storagePrefix: storagePrefix
    rootClientId: rootClientId
    issuerClientId: issuerClientId
    claimTimeoutSeconds: claimTimeoutSeconds
    claimWorkPollSeconds: claimWorkPollSeconds
    deadlineDelaySeconds: deadlineDelaySeconds
    reaperSchedule: reaperSchedule
    reaperStaleSeconds: reaperStaleSeconds
    maxTaskDeadlineDays: maxTaskDeadlineDays
    pendingShards: pendingShards
    eventGridEndpoint: deployEventGridTopic ? eventGrid!.outputs.endpoint : ''
    delegatedAccounts: [for (a, i) in delegatedStorageAccounts: { name: a.name, setting: delegatedAccounts[i].outputs.setting }]
  }
}

// ---------------------------------------------------------------------------------------------
// Outputs
// ---------------------------------------------------------------------------------------------

@description('Taskcluster root URL: give it to taskcluster-client (rootUrl) and workers. The queue API is at <rootUrl>/api/queue/v1.')
output rootUrl string = functionApp.outputs.publicUrl

@description('Function app name, for publishing the package.')
output functionAppName string = functionApp.outputs.name

@description('Client id of the root client.')
output rootClientId string = rootClientId

@description('Key Vault holding the root access token.')
output keyVaultName string = keyVault.outputs.name

@description('Secret name of the root access token.')
output rootAccessTokenSecretName string = keyVault.outputs.rootAccessTokenSecretName

@description('How to read the root credentials (needs Key Vault Secrets User/Officer on the vault, e.g. via adminPrincipalId).')
output rootCredentialsCommand string = 'az keyvault secret show --vault-name ${keyVault.outputs.name} --name ${keyVault.outputs.rootAccessTokenSecretName} --query value -o tsv'

@description('How to publish the package built by `npm run package`.')
output publishCommand string = 'az functionapp deployment source config-zip --resource-group ${resourceGroup().name} --name ${functionApp.outputs.name} --src .package/app.zip'

@description('Queue data storage account (tables, queues, artifact blobs); the first one when there are several.')
output dataStorageAccountName string = dataStorage[0].outputs.name

@description('Every queue data storage account, in the order the app places data on them.')
output dataStorageAccountNames array = [for i in range(0, dataAccountCount): dataStorage[i].outputs.name]

@description('Event Grid topic receiving queue events (empty unless deployEventGridTopic).')
output eventGridTopicEndpoint string = deployEventGridTopic ? eventGrid!.outputs.endpoint : ''

@description('Application Insights component.')
output applicationInsightsName string = monitoring.outputs.name
