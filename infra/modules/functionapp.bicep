// Flex Consumption plan (FC1, Linux) + the function app + its app settings.
// Checked (search, Azure/bicep-types-az generated/web/microsoft.web/2024-04-01/types.md):
//   serverfarms sku {name 'FC1', tier 'FlexConsumption'}, properties.reserved
//   sites properties: httpsOnly, keyVaultReferenceIdentity, serverFarmId, read-only defaultHostName,
//     functionAppConfig.deployment.storage {type 'blobContainer', value, authentication {type
//     'UserAssignedIdentity', userAssignedIdentityResourceId}},
//     functionAppConfig.runtime {name 'node', version},
//     functionAppConfig.scaleAndConcurrency {instanceMemoryMB, maximumInstanceCount,
//     alwaysReady [{name, instanceCount}], triggers.http.perInstanceConcurrency}
//   siteConfig: minTlsVersion / scmMinTlsVersion ('1.2'), ftpsState, http20Enabled, cors
//   sites/config 'appsettings': the shape used by the Azure-Samples Flex templates
//     (functions-quickstart-typescript-azd infra/core/host/functions-flexconsumption.bicep).
// Deliberately absent (Flex Consumption deprecations): FUNCTIONS_WORKER_RUNTIME,
// FUNCTIONS_EXTENSION_VERSION, WEBSITE_RUN_FROM_PACKAGE, content-share settings,
// WEBSITE_NODE_DEFAULT_VERSION, linuxFxVersion, alwaysOn; the runtime lives in functionAppConfig.

@description('Function app name (globally unique; part of the default hostname).')
@maxLength(60)
param name string

@description('Flex Consumption plan name.')
param planName string

@description('Azure region (must offer Flex Consumption).')
param location string

@description('Resource tags.')
param tags object = {}

@description('Resource id of the user-assigned identity the app runs as.')
param identityId string

@description('Client id of that identity (for identity-based host storage and App Insights auth).')
param identityClientId string

@description('Name of the host storage account (AzureWebJobsStorage, identity-based).')
param hostStorageAccountName string

@description('URL of the blob container holding the deployment package.')
param deploymentContainerUrl string

@description('Application Insights connection string.')
param appInsightsConnectionString string

@description('Node.js major version.')
@allowed([
  '20'
  '22'
])
param nodeRuntimeVersion string

@description('Instance memory size in MB.')
@allowed([
  512
  2048
  4096
])
param instanceMemoryMB int

@description('Upper bound on instances the app scales out to.')
@minValue(1)
@maxValue(1000)
param maximumInstanceCount int

@description('Concurrent HTTP invocations per instance before Flex adds an instance.')
@minValue(1)
@maxValue(1000)
param httpPerInstanceConcurrency int

@description('Always-ready instances for the http group (0: scale to zero; billed when above 0).')
@minValue(0)
param alwaysReadyInstances int

@description('Origins allowed by the platform CORS handler (the dashboard).')
param corsAllowedOrigins array

// Key Vault secret URIs are versionless, so the app always resolves the latest secret version.
@description('Key Vault secret URI of the data account connection string.')
param storageConnectionSecretUri string

@description('Key Vault secret URI of the further data accounts\' connection strings; empty: one data account.')
param moreStorageConnectionsSecretUri string = ''

@description('Key Vault secret URI of the root access token.')
param rootAccessTokenSecretUri string

@description('Key Vault secret URI of the token encryption key.')
param tokenEncryptionKeySecretUri string

@description('Public queue endpoint of the data account, for SAS poll URLs.')
param publicQueueEndpoint string

@description('QUEUE_PUBLIC_URL override; empty: https://<default hostname>.')
param publicUrl string = ''

// Values of the non-secret QUEUE_* settings; main.bicep documents each one.
@description('QUEUE_STORAGE_PREFIX')
param storagePrefix string

@description('QUEUE_ROOT_CLIENT_ID')
param rootClientId string

@description('QUEUE_ISSUER_CLIENT_ID')
param issuerClientId string

@description('QUEUE_CLAIM_TIMEOUT_S')
param claimTimeoutSeconds int

@description('QUEUE_CLAIM_WORK_POLL_S')
param claimWorkPollSeconds int

@description('QUEUE_DEADLINE_DELAY_S')
param deadlineDelaySeconds int

@description('QUEUE_REAPER_SCHEDULE')
param reaperSchedule string

@description('QUEUE_REAPER_STALE_S')
param reaperStaleSeconds int

@description('QUEUE_MAX_TASK_DEADLINE_DAYS')
param maxTaskDeadlineDays int

@description('QUEUE_EVENTGRID_ENDPOINT: Event Grid topic for queue events; empty: none.')
param eventGridEndpoint string = ''

@description('QUEUE_AZURE_ACCOUNTS: [{name, setting}], each setting the identity form modules/delegated-account.bicep outputs; empty: none.')
param delegatedAccounts array = []

@description('QUEUE_PENDING_SHARDS')
param pendingShards string = '1'

resource plan 'Microsoft.Web/serverfarms@2024-04-01' = {
  name: planName
  location: location
  tags: tags
  kind: 'functionapp'
  sku: {
    name: 'FC1'
    tier: 'FlexConsumption'
  }
  properties: {
    reserved: true
  }
}

resource site 'Microsoft.Web/sites@2024-04-01' = {
  name: name
  location: location
  tags: tags
  kind: 'functionapp,linux'
  identity: {
    type: 'UserAssigned'
    userAssignedIdentities: {
      '${identityId}': {}
    }
  }
  properties: {
    serverFarmId: plan.id
    httpsOnly: true
    keyVaultReferenceIdentity: identityId
    siteConfig: {
      minTlsVersion: '1.2'
      scmMinTlsVersion: '1.2'
      ftpsState: 'Disabled'
      http20Enabled: true
      cors: {
        allowedOrigins: corsAllowedOrigins
        supportCredentials: false
      }
    }
    functionAppConfig: {
      deployment: {
        storage: {
          type: 'blobContainer'
          value: deploymentContainerUrl
          authentication: {
            type: 'UserAssignedIdentity'
            userAssignedIdentityResourceId: identityId
          }
        }
      }
      runtime: {
        name: 'node'
        version: nodeRuntimeVersion
      }
      scaleAndConcurrency: {
        instanceMemoryMB: instanceMemoryMB
        maximumInstanceCount: maximumInstanceCount
        alwaysReady: alwaysReadyInstances > 0 ? [
          {
            name: 'http'
            instanceCount: alwaysReadyInstances
          }
        ] : []
        triggers: {
          http: {
            perInstanceConcurrency: httpPerInstanceConcurrency
          }
        }
      }
    }
  }
}

var effectivePublicUrl = empty(publicUrl) ? 'https://${site.properties.defaultHostName}' : publicUrl

// The complete set of app settings (this resource replaces whatever was there before).
// Every name in shared/config.ts SETTING_NAMES is set here; test/infra.test.ts checks it.
resource appSettings 'Microsoft.Web/sites/config@2024-04-01' = {
  parent: site
  name: 'appsettings'
  properties: {
    // Functions host storage, identity-based (the account has shared keys disabled).
    AzureWebJobsStorage__accountName: hostStorageAccountName
    AzureWebJobsStorage__credential: 'managedidentity'
    AzureWebJobsStorage__clientId: identityClientId
    APPLICATIONINSIGHTS_CONNECTION_STRING: appInsightsConnectionString
    APPLICATIONINSIGHTS_AUTHENTICATION_STRING: 'ClientId=${identityClientId};Authorization=AAD'

    // The queue service's own settings (shared/config.ts).
    QUEUE_STORAGE_CONNECTION: '@Microsoft.KeyVault(SecretUri=${storageConnectionSecretUri})'
    QUEUE_STORAGE_MORE_CONNECTIONS: empty(moreStorageConnectionsSecretUri) ? '' : '@Microsoft.KeyVault(SecretUri=${moreStorageConnectionsSecretUri})'
    QUEUE_STORAGE_PREFIX: storagePrefix
    QUEUE_PUBLIC_URL: effectivePublicUrl
    QUEUE_ROOT_CLIENT_ID: rootClientId
    QUEUE_ROOT_ACCESS_TOKEN: '@Microsoft.KeyVault(SecretUri=${rootAccessTokenSecretUri})'
    QUEUE_TOKEN_ENCRYPTION_KEY: '@Microsoft.KeyVault(SecretUri=${tokenEncryptionKeySecretUri})'
    QUEUE_ISSUER_CLIENT_ID: issuerClientId
    QUEUE_CLAIM_TIMEOUT_S: string(claimTimeoutSeconds)
    QUEUE_CLAIM_WORK_POLL_S: string(claimWorkPollSeconds)
    QUEUE_DEADLINE_DELAY_S: string(deadlineDelaySeconds)
    QUEUE_REAPER_SCHEDULE: reaperSchedule
    QUEUE_REAPER_STALE_S: string(reaperStaleSeconds)
    QUEUE_PUBLIC_QUEUE_ENDPOINT: publicQueueEndpoint
    QUEUE_MAX_TASK_DEADLINE_DAYS: string(maxTaskDeadlineDays)
    // Poll-URL SAS tokens are valid over HTTPS only in Azure (the http fallback exists for Azurite).
    QUEUE_SAS_PROTOCOL: 'https'
    // Events to Event Grid (optional), sent with the app identity; no topic key is ever set.
    QUEUE_EVENTGRID_ENDPOINT: eventGridEndpoint
    QUEUE_EVENTGRID_KEY: ''
    QUEUE_EVENTGRID_CLIENT_ID: identityClientId
    QUEUE_PENDING_SHARDS: pendingShards
    // Accounts Auth's azureTableSAS / azureContainerSAS delegate, reached through the app identity (no keys); empty: none.
    QUEUE_AZURE_ACCOUNTS: empty(delegatedAccounts) ? '' : string(toObject(delegatedAccounts, a => a.name, a => a.setting))
  }
}

output name string = site.name
output defaultHostName string = site.properties.defaultHostName
output publicUrl string = effectivePublicUrl
